"""`wiggle conformance --flow`: one flow of the user's under every mode, differences reported."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from wiggle.cli import main

FLOW = """\
wiggle: 1
name: flow-check
steps:
  - task: plain
  - filter: keep
  - task: stamp
"""

HANDLERS = """\
from wiggle import activity, step


@activity
def plain(ctx):
    return {**ctx, "plain": True}


@activity
def keep(ctx):
    return True


@activity
def stamp(ctx):
    return {**ctx, "stamped": STAMP}
"""


def _files(tmp_path: Path, stamp: str) -> tuple[str, str]:
    flow = tmp_path / "flow.yaml"
    flow.write_text(FLOW)
    handlers = tmp_path / "handlers.py"
    handlers.write_text(textwrap.dedent(HANDLERS).replace("STAMP", stamp))
    return str(flow), str(handlers)


def test_a_flow_that_behaves_the_same_in_every_mode(tmp_path: Path, capsys) -> None:
    flow, handlers = _files(tmp_path, "step().instance_id")  # the same id in every mode
    code = main(["conformance", "--flow", flow, "--handlers", handlers, "--input", '{"x": 1}'])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1] == "modes agree"
    assert out.count("COMPLETED") == 3


def test_a_handler_that_behaves_differently_per_mode_is_reported(tmp_path: Path, capsys) -> None:
    flow, handlers = _files(tmp_path, "str(step().execution_mode)")
    code = main(["conformance", "--flow", flow, "--handlers", handlers, "--json"])
    doc = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert code == 1
    assert not doc["agree"]
    stamps = {o["mode"]: o["context"]["stamped"] for o in doc["outcomes"]}
    assert stamps == {"SERVER": "SERVER", "LOCAL_SYNC": "LOCAL_SYNC", "LOCAL_ASYNC": "LOCAL_ASYNC"}
    assert any("context" in d and "SERVER vs LOCAL_SYNC" in d for d in doc["differences"])
    assert all(o["steps"] == {"plain": 1, "keep": 1, "stamp": 1} for o in doc["outcomes"])


def test_a_flow_with_an_error_is_named_at_its_line(tmp_path: Path, capsys) -> None:
    flow, handlers = _files(tmp_path, "1")
    Path(flow).write_text(FLOW.replace("filter: keep", "filtre: keep"))
    code = main(["conformance", "--flow", flow, "--handlers", handlers])
    assert code == 2
    assert f"{flow}:5:" in capsys.readouterr().err


def test_flow_needs_handlers(tmp_path: Path, capsys) -> None:
    flow, _ = _files(tmp_path, "1")
    code = main(["conformance", "--flow", flow])
    assert code != 0
    assert "--flow needs --handlers" in capsys.readouterr().err


RACE = """\
wiggle: 1
name: flow-check-race
steps:
  - task: first
  - await: go
    timeout: 1ms
    apply: took
    on_timeout: [{task: timed_out}]
"""


def test_a_signal_due_when_a_step_starts_is_in_before_the_step_ends(tmp_path: Path) -> None:
    # The await times out the moment it is reached, so the signal must be in (buffered) before
    # `first` reports. It is sent as `first` starts, from the worker: no load on the machine can
    # make it late. Sent from the checker's polling loop instead, it came after the timeout.
    from wiggle.compiler import load_flow
    from wiggle.conformance import FlowSignal, check_flow
    from wiggle.conformance._cases import Moment
    from wiggle.worker import Registry

    registry = Registry()
    registry.register(lambda ctx: {**ctx, "first": True}, "first")
    registry.register(lambda arg: {**arg["context"], "signal": arg["signal"]}, "took")
    registry.register(lambda ctx: {**ctx, "timed_out": True}, "timed_out")
    signal = FlowSignal("go", 7, Moment.parse("started:first"))
    check = check_flow(load_flow(RACE.encode()), registry, {}, signals=[signal])
    assert check.agree, check.differences + [o.problem for o in check.outcomes]
    for outcome in check.outcomes:
        assert outcome.context == {"first": True, "signal": 7}, outcome.mode
