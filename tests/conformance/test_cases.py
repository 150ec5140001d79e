"""The corpus as data: every case file validates, ids and flow names are unique, flows compile,
and every node a case names exists in its flows."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from wiggle.compiler import load_flow
from wiggle.conformance import CaseError, default_spec_dir, load_case, load_cases
from wiggle.conformance._cases import case_files

SPEC = default_spec_dir()
FILES = case_files(SPEC)


def _read(path: Path):
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return YAML(typ="safe", pure=True).load(path.read_text())


def test_the_case_schema_is_a_valid_2020_12_schema():
    schema = json.loads((SPEC / "case.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)


def test_the_corpus_is_large_enough_and_covers_every_area():
    assert len(FILES) >= 60
    areas = {p.parent.name for p in FILES}
    expected = {"tasks", "filter", "choice", "parallel", "for_each", "loop", "sleep", "await"}
    assert areas >= expected | {"subflow", "retry", "options", "cancel", "crash"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SPEC / "cases")))
def test_case_validates_and_names_real_nodes(path: Path):
    schema = json.loads((SPEC / "case.schema.json").read_text())
    doc = _read(path)
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert doc["id"] == str(path.relative_to(SPEC / "cases").with_suffix(""))
    case = load_case(path)

    main = load_flow(json.dumps(case.flow), str(path))
    known = set(main.document["nodes"])
    versions = set()
    compiled = [main]
    for flow in case.flows:
        child = load_flow(json.dumps(flow), str(path))
        compiled.append(child)
        versions.add(child.version)
        known |= {f"{child.name}/{node}" for node in child.document["nodes"]}
    # A pinned subflow names the hash of one of the case's own flows: when the compiler's
    # canonical form changes, this says which case to re-pin (with `wiggle hash`).
    for flow in compiled:
        for node in flow.document["nodes"].values():
            if node["kind"] == "subflow" and node["version"] is not None:
                assert node["version"] in versions, f"stale pin {node['version']}"
    for run in case.runs:
        named = set(run.expect.steps) | set(run.expect.retry_delays_ms)
        for steps in run.expect.steps_by_mode.values():
            named |= set(steps)
        moments = [s.when for s in run.signals] + [f.when for f in run.faults]
        moments += [run.cancel] if run.cancel else []
        named |= {m.key for m in moments if m.kind != "at_start"}
        assert named <= known, f"unknown nodes {sorted(named - known)}"
        for name in run.expect.children:
            assert name in {f["name"] for f in case.flows}


def test_ids_and_flow_names_are_unique():
    cases = load_cases()
    assert len({c.id for c in cases}) == len(cases) == len(FILES)


def test_a_duplicate_id_is_refused(tmp_path: Path):
    spec = tmp_path / "spec"
    (spec / "cases" / "x").mkdir(parents=True)
    (spec / "case.schema.json").write_text((SPEC / "case.schema.json").read_text())
    source = (SPEC / "cases" / "tasks" / "linear.yaml").read_text()
    (spec / "cases" / "x" / "a.yaml").write_text(source)
    (spec / "cases" / "x" / "b.yaml").write_text(source)
    with pytest.raises(CaseError, match="also used by"):
        load_cases(spec_dir=spec)


def test_a_case_off_the_schema_is_refused_with_its_path(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\ndescription: d\nflow: {wiggle: 1, name: x, steps: []}\nruns: []\n")
    with pytest.raises(CaseError, match=r"\$\.runs"):
        load_case(bad)
