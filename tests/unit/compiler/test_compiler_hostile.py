"""Hostile documents are refused early and cheaply, with a message, never a traceback.

No timing asserts: the per-test timeout is the guard against a pathological slow path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wiggle.compiler import load_flow, load_flow_file
from wiggle.errors import FlowError

pytestmark = pytest.mark.timeout(30)


def _reject(text: str | bytes) -> str:
    with pytest.raises(FlowError) as caught:
        load_flow(text, "evil.yaml")
    return str(caught.value)


def test_alias_bomb_is_refused_at_the_first_anchor() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    assert _reject("\n".join(lines)) == "evil.yaml:1:4: YAML anchors and aliases are not allowed"


@pytest.mark.parametrize("as_bytes", [False, True])
def test_ten_megabyte_document_is_refused_before_parsing(as_bytes: bool) -> None:
    text = "wiggle: 1\nname: x\ndescription: " + "x" * 10_000_000 + "\n"
    message = _reject(text.encode() if as_bytes else text)
    assert "the limit is 1048576 bytes" in message


def test_the_size_cap_can_be_lowered(tmp_path: Path) -> None:
    text = "wiggle: 1\nname: x\nsteps: [{task: a}]\n"
    with pytest.raises(FlowError, match="the limit is 10 bytes"):
        load_flow(text, max_bytes=10)
    (tmp_path / "f.yaml").write_text(text)
    with pytest.raises(FlowError, match="the limit is 10 bytes"):
        load_flow_file(tmp_path / "f.yaml", max_bytes=10)
    assert load_flow(text, max_bytes=len(text)).name == "x"


def test_ten_megabyte_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"wiggle: 1\n" + b"#" * 10_000_000)
    with pytest.raises(FlowError, match="the limit is 1048576 bytes"):
        load_flow_file(path)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 10_000 + "]" * 10_000,
        "{a: " * 10_000 + "1" + "}" * 10_000,
        "[a, " * 10_000 + "]" * 10_000,
        "- " * 10_000 + "x\n",
        "".join(" " * i + "a:\n" for i in range(1_000)) + " " * 1_000 + "1\n",
    ],
    ids=["flow-seq", "flow-map", "flow-seq-items", "block-seq", "block-map"],
)
def test_ten_thousand_deep_nesting_is_refused(text: str) -> None:
    assert "nesting is deeper than 64 levels" in _reject(text)


def test_nesting_at_the_cap_is_accepted() -> None:
    # The flow mapping is level 1; `input` holds 63 nested mappings: 64 levels, the cap.
    deep = "{a: " * 63 + "1" + "}" * 63
    flow = load_flow(f"wiggle: 1\nname: x\ninput: {deep}\nsteps: [{{task: a}}]\n")
    assert flow.document["input"]["a"]["a"]["a"] is not None
    assert "nesting is deeper" in _reject(f"wiggle: 1\nname: x\ninput: {{a: {deep}}}\n")


@pytest.mark.parametrize("digits", [400, 5_000, 100_000])
def test_huge_integer_is_refused(digits: int) -> None:
    text = f"wiggle: 1\nname: x\ninput: {{maximum: 1{'0' * digits}}}\nsteps: [{{task: a}}]\n"
    assert "evil.yaml:3:18: integer 1000" in _reject(text)
    assert "out of range (at most ±2^53)" in _reject(text)


def test_invalid_utf8_is_refused() -> None:
    assert "not UTF-8" in _reject(b"wiggle: 1\nname: \xff\n")


def test_unpaired_surrogate_is_refused() -> None:
    assert "evil.yaml:3:9: string has an unpaired surrogate" in _reject(
        'wiggle: 1\nname: x\ninput: {"\\udc00": 1}\n'
    )
    assert "evil.yaml:2:14: string has an unpaired surrogate" in _reject(
        'wiggle: 1\ndescription: "\\ud800"\n'
    )


@pytest.mark.parametrize(
    "text",
    ["", "\x00", "wiggle: 1\nname: x\nsteps: [{task: a}]\n" * 2, "? [a]\n: b\n", "!!set {a}\n"],
)
def test_odd_documents_give_diagnostics(text: str) -> None:
    _reject(text)


def test_missing_file_is_a_diagnostic(tmp_path: Path) -> None:
    with pytest.raises(FlowError, match="cannot read the flow"):
        load_flow_file(tmp_path / "absent.yaml")
