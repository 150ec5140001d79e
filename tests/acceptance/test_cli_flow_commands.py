"""`wiggle validate | hash | compile | render` driven as a subprocess, as a user would run them."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS = sorted((ROOT / "definitions").glob("*.yaml"))
GOLDEN = json.loads((ROOT / "definitions" / "hashes.json").read_text())
ORDER = ROOT / "definitions" / "order-fulfilment.yaml"

DIAGNOSTIC = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<message>.+)$")

GOOD = """\
# a comment the hash ignores
wiggle: 1
name: tiny
steps:
  - task: a
  - task: b
"""

# Each bad document with the position its first problem must be reported at.
BAD = {
    "no-combine.yaml": (
        "wiggle: 1\nname: no-combine\nsteps:\n  - task: a\n"
        "  - parallel:\n      x:\n        - task: b\n",
        "5:5",
        "combine",
    ),
    "bad-duration.yaml": (
        "wiggle: 1\nname: bad-duration\nsteps:\n  - sleep: 5 minutes\n",
        "4:12",
        "5 minutes",
    ),
    "bad-name.yaml": ("wiggle: 1\nname: Bad Name\nsteps:\n  - task: a\n", "2:7", "Bad Name"),
    "empty.yaml": ("", "1:1", "empty"),
}


def wiggle(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdin: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "wiggle", *args],
        cwd=cwd or ROOT,
        env=full_env,
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )


def lines(data: bytes) -> list[str]:
    return data.decode().splitlines()


@pytest.fixture
def flows(tmp_path: Path) -> Path:
    (tmp_path / "good.yaml").write_text(GOOD)
    for name, (text, _, _) in BAD.items():
        (tmp_path / name).write_text(text)
    return tmp_path


# -- validate ------------------------------------------------------------------------------------


def test_validate_a_good_flow(flows):
    done = wiggle("validate", "good.yaml", cwd=flows)
    assert done.returncode == 0
    assert done.stderr == b""
    assert re.fullmatch(r"good\.yaml: ok \(tiny sha256:[0-9a-f]{64}\)\n", done.stdout.decode())


@pytest.mark.parametrize("name", sorted(BAD))
def test_validate_a_bad_flow_reports_file_line_col(flows, name):
    _, position, fragment = BAD[name]
    done = wiggle("validate", name, cwd=flows)
    assert done.returncode == 1
    assert done.stdout == b""
    first = lines(done.stderr)[0]
    assert first.startswith(f"{name}:{position}: ")
    assert fragment in first
    assert all(DIAGNOSTIC.match(line) for line in lines(done.stderr))


def test_validate_several_files_reports_each(flows):
    names = ["good.yaml", *sorted(BAD), "missing.yaml"]
    done = wiggle("validate", *names, cwd=flows)
    assert done.returncode == 1
    assert [line.split(":")[0] for line in lines(done.stdout)] == ["good.yaml"]
    reported = [DIAGNOSTIC.match(line) for line in lines(done.stderr)]
    assert all(reported), done.stderr.decode()
    files = [m["file"] for m in reported if m]
    assert set(files) == {*BAD, "missing.yaml"}
    # in the order the files were given
    assert files == sorted(files, key=names.index)


def test_validate_all_good_exits_0(flows):
    done = wiggle("validate", *(str(p) for p in DEFINITIONS))
    assert done.returncode == 0, done.stderr.decode()
    assert len(lines(done.stdout)) == len(DEFINITIONS)


def test_validate_quiet_and_its_env_twin(flows):
    assert wiggle("validate", "-q", "good.yaml", cwd=flows).stdout == b""
    assert wiggle("validate", "good.yaml", cwd=flows, env={"WIGGLE_QUIET": "1"}).stdout == b""


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        (lambda d: None, "cannot read the flow"),  # missing
        (lambda d: (d / "flow.yaml").mkdir(), "cannot read the flow"),  # a directory
        (lambda d: (d / "flow.yaml").write_bytes(b"\xff\xfe\x00\x01"), "UTF-8"),
        (lambda d: (d / "flow.yaml").write_text("steps: [\n"), "syntax error"),
    ],
    ids=["missing", "directory", "binary", "unclosed"],
)
def test_unreadable_input_is_a_diagnostic_not_a_traceback(tmp_path, setup, fragment):
    setup(tmp_path)
    done = wiggle("validate", "flow.yaml", cwd=tmp_path)
    assert done.returncode == 1
    assert b"Traceback" not in done.stderr
    [line] = lines(done.stderr)
    assert DIAGNOSTIC.match(line) and line.startswith("flow.yaml:")
    assert fragment in line


def test_validate_reads_stdin(flows):
    done = wiggle("validate", "-", stdin=GOOD.encode())
    assert done.returncode == 0
    assert done.stdout.decode().startswith("-: ok (tiny ")


# -- hash and compile ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", DEFINITIONS, ids=lambda p: p.stem)
def test_hash_matches_the_golden_file(path):
    done = wiggle("hash", str(path.relative_to(ROOT)))
    assert done.returncode == 0, done.stderr.decode()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}\n", done.stdout.decode())
    assert done.stdout.decode().strip() == GOLDEN[path.name]


def test_hash_of_a_bad_flow_is_diagnostics(flows):
    done = wiggle("hash", "no-combine.yaml", cwd=flows)
    assert done.returncode == 1
    assert done.stdout == b""
    assert lines(done.stderr)[0].startswith("no-combine.yaml:5:5: ")


def test_compile_prints_canonical_json_whose_hash_is_the_version():
    done = wiggle("compile", str(ORDER))
    assert done.returncode == 0
    assert done.stdout.endswith(b"\n")
    body = done.stdout[:-1]
    doc = json.loads(body)
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert body == canonical.encode()
    assert "sha256:" + hashlib.sha256(body).hexdigest() == GOLDEN[ORDER.name]
    assert doc["name"] == "order-fulfilment"
    assert doc["nodes"]["capture"]["checkpoint"] is True


def test_compile_pretty_is_the_same_document_indented():
    plain = json.loads(wiggle("compile", str(ORDER)).stdout)
    for done in (
        wiggle("compile", "--pretty", str(ORDER)),
        wiggle("compile", str(ORDER), env={"WIGGLE_PRETTY": "true"}),
    ):
        assert done.returncode == 0
        assert done.stdout.startswith(b"{\n  ")
        assert json.loads(done.stdout) == plain


def test_compile_of_a_missing_flow_is_clean(tmp_path):
    done = wiggle("compile", "nope.yaml", cwd=tmp_path)
    assert done.returncode == 1
    assert b"Traceback" not in done.stderr
    assert lines(done.stderr) == ["nope.yaml:1:1: cannot read the flow: No such file or directory"]


# -- render --------------------------------------------------------------------------------------

MAGIC = {"svg": b"<?xml", "png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-", "dot": b"digraph "}


@pytest.mark.parametrize("fmt", sorted(MAGIC))
def test_render_writes_the_format_named_by_the_suffix(tmp_path, fmt):
    out = tmp_path / f"order.{fmt}"
    done = wiggle("render", str(ORDER), "-o", str(out))
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == done.stderr == b""
    data = out.read_bytes()
    assert data.startswith(MAGIC[fmt])
    if fmt == "svg":
        texts = {
            "".join(t.itertext())
            for t in ET.fromstring(data).iter("{http://www.w3.org/2000/svg}text")
        }
        assert {"authorise", "capture", "merge", "notify"} <= texts


def test_render_format_flag_and_env_twin_override_the_suffix(tmp_path):
    out = tmp_path / "diagram.out"
    assert wiggle("render", str(ORDER), "-o", str(out), "--format", "png").returncode == 0
    assert out.read_bytes().startswith(MAGIC["png"])
    done = wiggle("render", str(ORDER), "-o", str(out), env={"WIGGLE_RENDER_FORMAT": "pdf"})
    assert done.returncode == 0
    assert out.read_bytes().startswith(MAGIC["pdf"])


def test_render_to_stdout(tmp_path):
    done = wiggle("render", str(ORDER), "-o", "-", "--format", "dot")
    assert done.returncode == 0
    assert done.stdout.startswith(b'digraph "order-fulfilment" {')


def test_render_with_states_highlights_nodes(tmp_path):
    states = tmp_path / "states.json"
    states.write_text(json.dumps({"validate": "DONE", "authorise": {"RUNNING": 2}}))
    done = wiggle("render", str(ORDER), "-o", "-", "-f", "dot", "--states", str(states))
    assert done.returncode == 0
    assert b"RUNNING 2" in done.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["-o", "out.jpg"],
            2,
            "wiggle render: cannot tell the output format of 'out.jpg' (suffix .jpg)",
        ),
        (["-o", "out"], 2, "wiggle render: cannot tell the output format of 'out' (no suffix)"),
        (["-o", "-"], 2, "wiggle render: writing to stdout (-o -) needs --format"),
        (
            ["-o", "no/such/dir/out.svg"],
            1,
            "wiggle render: cannot write no/such/dir/out.svg: No such file or directory",
        ),
        (
            ["-o", "out.svg", "--states", "missing.json"],
            2,
            "wiggle render: cannot use --states missing.json",
        ),
    ],
    ids=["jpg", "no-suffix", "stdout-needs-format", "unwritable", "bad-states"],
)
def test_render_usage_errors_are_clean(tmp_path, args, code, message):
    done = wiggle("render", str(ORDER), *args, cwd=tmp_path)
    assert done.returncode == code
    assert b"Traceback" not in done.stderr
    assert lines(done.stderr)[0].startswith(message)
    assert not (tmp_path / "out.jpg").exists()


def test_render_without_output_writes_beside_the_flow(tmp_path):
    """`wiggle render flow.yaml`, the command users type first, used to fail (-o required)."""
    flow = tmp_path / "order.yaml"
    flow.write_bytes(ORDER.read_bytes())
    done = wiggle("render", "order.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert lines(done.stdout) == ["order.svg"]
    assert (tmp_path / "order.svg").read_bytes().startswith(MAGIC["svg"])
    done = wiggle("render", "order.yaml", "--format", "png", cwd=tmp_path)
    assert lines(done.stdout) == ["order.png"]


@pytest.mark.parametrize(
    ("states", "message"),
    [
        ({"validate": "DONE", "nope": "RUNNING"}, "no node 'nope' in flow 'order-fulfilment'"),
        ({"validate": "BUSY"}, "unknown state 'BUSY' (use FAILED, RUNNING, READY"),
        ({"validate": {"DONE": 1, "Lost": 2}}, "unknown state 'Lost'"),
    ],
    ids=["unknown-node", "unknown-state", "unknown-state-in-counts"],
)
def test_render_states_refuses_unknown_nodes_and_states(tmp_path, states, message):
    (tmp_path / "states.json").write_text(json.dumps(states))
    done = wiggle("render", str(ORDER), "-o", "out.svg", "--states", "states.json", cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr.decode()
    assert not (tmp_path / "out.svg").exists()


def test_render_needs_a_flow_or_an_instance(tmp_path):
    done = wiggle("render", cwd=tmp_path)
    assert done.returncode == 2
    assert lines(done.stderr) == [
        "wiggle render: give a FLOW file, --instance ID or --diff OLD NEW (one of them)"
    ]


def test_render_diff_marks_what_changed(tmp_path):
    (tmp_path / "v1.yaml").write_text("wiggle: 1\nname: v\nsteps:\n  - task: a\n  - task: b\n")
    (tmp_path / "v2.yaml").write_text("wiggle: 1\nname: v\nsteps:\n  - task: a\n  - task: c\n")
    done = wiggle("render", "--diff", "v1.yaml", "v2.yaml", "-o", "d.dot", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    dot = (tmp_path / "d.dot").read_text()
    assert "ADDED" in dot and "removed: b" in dot


def test_render_bad_env_format_is_a_usage_error(tmp_path):
    done = wiggle(
        "render", str(ORDER), "-o", "x.svg", cwd=tmp_path, env={"WIGGLE_RENDER_FORMAT": "gif"}
    )
    assert done.returncode == 2
    assert lines(done.stderr) == [
        "wiggle render: unknown format 'gif'; use one of svg, png, pdf, dot"
    ]


def test_render_a_bad_flow_reports_diagnostics_and_writes_nothing(flows):
    done = wiggle("render", "no-combine.yaml", "-o", "x.svg", cwd=flows)
    assert done.returncode == 1
    assert lines(done.stderr)[0].startswith("no-combine.yaml:5:5: ")
    assert not (flows / "x.svg").exists()


def test_render_without_graphviz_says_how_to_install_it(tmp_path):
    # PATH without dot (but the interpreter is run by absolute path, so it still starts)
    done = wiggle("render", str(ORDER), "-o", "x.svg", cwd=tmp_path, env={"PATH": str(tmp_path)})
    assert done.returncode == 1
    assert b"Traceback" not in done.stderr
    assert (
        "Graphviz `dot` not found; install it with apt-get install graphviz" in done.stderr.decode()
    )
