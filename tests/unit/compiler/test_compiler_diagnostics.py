"""Bad documents: each rejected with a FlowError naming the problem at its line and column."""

from __future__ import annotations

import pytest

from wiggle.compiler import load_flow
from wiggle.errors import FlowError

H = "wiggle: 1\nname: x\n"
PIN = "sha256:" + "0" * 64

# (case id, document, [(line, column, message substring), ...]) — every diagnostic, in order.
BAD: list[tuple[str, str, list[tuple[int, int, str]]]] = [
    ("syntax", "wiggle: 1\nname: [x\nsteps:\n", [(3, 6, "syntax error")]),
    ("tab-indent", "wiggle: 1\n\tname: x\n", [(2, 1, "syntax error")]),
    ("duplicate-key", H + "name: y\nsteps: [{task: a}]\n", [(3, 1, "duplicate key 'name'")]),
    ("anchor", "wiggle: 1\nname: &n x\nsteps: [{task: a}]\n", [(2, 7, "anchors and aliases")]),
    ("multi-doc", H + "steps: [{task: a}]\n---\nwiggle: 1\n", [(4, 1, "only one YAML document")]),
    ("empty", "# nothing\n", [(1, 1, "the document is empty")]),
    ("tag", H + "steps: [{task: !!binary YQ==}]\n", [(3, 16, "YAML tags are not allowed")]),
    ("not-a-mapping", "- task: a\n", [(1, 1, "must be of type object")]),
    ("missing-name", "wiggle: 1\nsteps: [{task: a}]\n", [(1, 1, "missing required key 'name'")]),
    ("format-version", "wiggle: 2\nname: x\nsteps: [{task: a}]\n", [(1, 9, "must be 1")]),
    ("bad-name", "wiggle: 1\nname: Order\nsteps: [{task: a}]\n", [(2, 7, "not a valid flow name")]),
    (
        "unknown-top-key",
        H + "step: []\nsteps: [{task: a}]\n",
        [(3, 1, "unknown key 'step'")],
    ),
    (
        "unknown-step-key",
        H + "steps:\n  - task: a\n    retries: 3\n",
        [(5, 5, "unknown key 'retries'")],
    ),
    (
        "two-unknown-keys-both-reported",
        H + "steps:\n  - task: a\n    retries: 3\n  - task: b\n    timout: 1s\n",
        [(5, 5, "unknown key 'retries'"), (7, 5, "unknown key 'timout'")],
    ),
    ("no-block-key", H + "steps:\n  - id: a\n", [(4, 5, "a step needs one block key")]),
    (
        "two-block-keys",
        H + "steps:\n  - task: a\n    filter: b\n",
        [(4, 5, "exactly one block key; found task, filter")],
    ),
    ("step-not-mapping", H + "steps:\n  - task\n", [(4, 5, "a step must be a mapping")]),
    ("empty-steps", H + "steps: []\n", [(3, 8, "steps must not be empty")]),
    (
        "parallel-without-combine",
        H + "steps:\n  - parallel: {a: [{task: a}]}\n",
        [(4, 5, "missing required key 'combine'")],
    ),
    (
        "for_each-without-combine",
        H + "steps:\n  - for_each: /xs\n    steps: [{task: a}]\n",
        [(4, 5, "missing required key 'combine'")],
    ),
    (
        "empty-branch",
        H + "steps:\n  - parallel: {a: [], b: [{task: b}]}\n    combine: c\n",
        [(4, 19, "must not be empty")],
    ),
    (
        "empty-parallel",
        H + "steps:\n  - parallel: {}\n    combine: c\n",
        [(4, 15, "must not be empty")],
    ),
    (
        "empty-otherwise",
        H + "steps:\n  - choice: [{when: p, steps: [{task: a}]}]\n    otherwise: []\n",
        [(5, 16, "must not be empty")],
    ),
    (
        "loop-without-while",
        H + "steps:\n  - loop:\n      steps: [{task: a}]\n",
        [(5, 7, "missing required key 'while'")],
    ),
    (
        "loop-zero-iterations",
        H + "steps:\n  - loop: {steps: [{task: a}], while: p, max_iterations: 0}\n",
        [(4, 58, "less than the minimum of 1")],
    ),
    (
        "loop-absurd-iterations",
        H + "steps:\n  - loop: {steps: [{task: a}], while: p, max_iterations: 1000001}\n",
        [(4, 58, "greater than the maximum of 1000000")],
    ),
    (
        "bad-pointer",
        H + "steps:\n  - for_each: items\n    steps: [{task: a}]\n    combine: c\n",
        [(4, 15, "not a valid JSON pointer")],
    ),
    (
        "bad-pointer-escape",
        H + "steps:\n  - sleep: {until: /a~2}\n",
        [(4, 20, "not a valid JSON pointer")],
    ),
    ("bad-duration", H + "steps:\n  - sleep: 5 minutes\n", [(4, 12, "not a valid duration")]),
    ("zero-duration", H + "steps:\n  - sleep: 0s\n", [(4, 12, "must be greater than zero")]),
    (
        "long-duration",
        H + "steps:\n  - sleep: 366d\n",
        [(4, 12, "longer than the maximum of 365d")],
    ),
    (
        "bad-timeout-and-retry-durations",
        H + "steps:\n  - task: a\n    timeout: 0ms\n    retry: {initial: 400d}\n",
        [(5, 14, "greater than zero"), (6, 22, "longer than the maximum")],
    ),
    (
        "retry-initial-over-max",
        H + "steps:\n  - task: a\n    retry: {initial: 10s, max: 5s}\n",
        [(5, 22, "retry initial 10s is longer than max 5s")],
    ),
    (
        "retry-initial-over-default-max",
        H + "steps:\n  - task: a\n    retry: {initial: 2m}\n",
        [(5, 22, "longer than max 60000ms (the default)")],
    ),
    (
        "retry-bad-backoff",
        H + "steps:\n  - task: a\n    retry: {backoff: linear}\n",
        [(5, 22, "'linear' is not a valid backoff")],
    ),
    (
        "float-for-integer",
        H + "steps:\n  - task: a\n    retry: {max_attempts: 3.0}\n",
        [(5, 27, "must be of type integer, not number")],
    ),
    (
        "huge-integer",
        H + "steps:\n  - task: a\n    retry: {max_attempts: 9007199254740993}\n",
        [(5, 27, "out of range")],
    ),
    (
        "sleep-both",
        H + "steps:\n  - sleep: {until: /t, duration: 5s}\n",
        [(4, 24, "unknown key 'duration'")],
    ),
    ("sleep-neither", H + "steps:\n  - sleep: {}\n", [(4, 12, "missing required key 'until'")]),
    (
        "sleep-wrong-type",
        H + "steps:\n  - sleep: 30\n  - sleep:\n",
        [(4, 12, "sleep must be of type string or object, not integer"), (5, 5, "not null")],
    ),
    (
        "on-timeout-without-timeout",
        H + "steps:\n  - await: s\n    on_timeout: [{task: a}]\n",
        [(5, 5, "has on_timeout steps but no timeout")],
    ),
    (
        "subflow-name-cannot-exist",
        H + "steps:\n  - subflow: Billing_Run\n",
        [(4, 14, "no flow can be named 'Billing_Run'")],
    ),
    (
        "version-pin",
        H + "steps:\n  - subflow: y\n    version: sha256:abc\n",
        [(5, 14, "not a valid version pin")],
    ),
    (
        "duplicate-ids",
        H + "steps:\n  - task: a\n  - task: b\n  - task: a\n",
        [(6, 11, "duplicate node id 'a' (also used at line 4, column 11)")],
    ),
    ("reserved-end", H + "steps:\n  - task: end\n", [(4, 11, "'end' is reserved")]),
    (
        "parallel-id-clash-at-key",
        H + "steps:\n  - task: parallel-1\n  - parallel:\n      a: [{task: a}]\n    combine: c\n",
        [(5, 5, "duplicate node id 'parallel-1' (also used at line 4, column 11)")],
    ),
    (
        "loop-predicate-clash",
        H + "steps:\n  - filter: p\n  - loop:\n      steps: [{task: a}]\n      while: p\n",
        [(7, 14, "duplicate node id 'p' (also used at line 4, column 13)")],
    ),
    (
        "join-clash",
        H + "steps:\n  - parallel: {a: [{task: a}]}\n    combine: c\n  - task: t\n"
        "    id: parallel-1.join\n",
        [(7, 9, "duplicate node id 'parallel-1.join'")],
    ),
    (
        "choice-arm-clash",
        H + "steps:\n  - choice:\n      - when: p\n        steps: [{task: a}]\n"
        "      - when: p\n        steps: [{task: b}]\n",
        [(7, 15, "duplicate node id 'p'")],
    ),
    (
        "bad-execution",
        H + "execution: FAST\nsteps: [{task: a}]\n",
        [(3, 12, "expected one of SERVER, LOCAL_SYNC, LOCAL_ASYNC, DEFAULT")],
    ),
    (
        "bad-input-schema",
        H + "input: {type: objekt}\nsteps: [{task: a}]\n",
        [(3, 15, "input is not a valid JSON Schema")],
    ),
    (
        "activity-not-string",
        H + "steps:\n  - task: 5\n",
        [(4, 11, "must be of type string, not integer")],
    ),
    (
        "bad-node-id",
        H + "steps:\n  - task: a\n    id: has space\n",
        [(5, 9, "not a valid node id")],
    ),
    (
        "infinity",
        H + "input: {maximum: .inf}\nsteps: [{task: a}]\n",
        [(3, 18, "not a JSON number")],
    ),
    (
        "misspelled-block-named-at-its-key",
        H + "steps:\n  - task: a\n  - tsk: b\n    id: b\n",
        [(5, 5, "unknown block 'tsk' (did you mean 'task'?); a step needs one block key")],
    ),
    (
        "unknown-block-without-a-near-name",
        H + "steps:\n  - frobnicate: x\n",
        [(4, 5, "unknown block 'frobnicate'; a step needs one block key: one of task")],
    ),
    (
        "duplicate-id-beside-a-schema-error",
        H + "steps:\n  - task: a\n  - task: a\n  - sleep: 5x\n",
        [(5, 11, "duplicate node id 'a'"), (6, 12, "'5x' is not a valid duration")],
    ),
    (
        "not-utf8-at-1-1",
        b"wiggle: 1\nname: \xff\n",
        [(1, 1, "document is not UTF-8")],
    ),
    # Expressions: located inside the string, however the YAML scalar is written.
    ("expr-syntax", H + 'steps:\n  - filter: {if: "ctx.a +"}\n', [(4, 26, "ends too early")]),
    (
        "expr-folded",
        H + "steps:\n  - set:\n      total: >-\n        ctx.a +\n        nope(ctx.b)\n",
        [(7, 9, "nope() is not a function")],
    ),
    (
        "expr-folded-blank-line",
        H + "steps:\n  - set:\n      t: >-\n        ctx.a\n\n        + nope(1)\n",
        [(8, 11, "nope() is not a function")],
    ),
    (
        "expr-literal-more-indented",
        H + "steps:\n  - set:\n      t: |-\n        ctx.a +\n          nope(1)\n",
        [(7, 11, "nope() is not a function")],
    ),
    (
        "expr-plain-two-lines",
        H + "steps:\n  - filter:\n      if: ctx.a > 1 &&\n        nope(ctx.b)\n",
        [(6, 9, "nope() is not a function")],
    ),
    (
        "expr-undeclared",
        H + 'steps:\n  - loop:\n      steps: [{task: a}]\n      while: {if: "x > 1"}\n',
        [(6, 20, "undeclared reference to 'x'")],
    ),
    (
        "expr-not-bool",
        H + 'steps:\n  - filter: {if: "ctx.a + 1"}\n',
        [(4, 19, "a condition must be a bool; its type is int")],
    ),
    (
        "expr-sleep-until",
        H + 'steps:\n  - sleep: {until: "nope(ctx.t)"}\n',
        [(4, 21, "nope() is not a function")],
    ),
    (
        "expr-arm-queue",
        H
        + "steps:\n  - choice:\n      - if: ctx.a\n        queue: q\n        steps: [{task: a}]\n",
        [(6, 9, "`queue` applies to a predicate activity; an `if` arm runs no activity")],
    ),
    (
        "expr-arm-when-and-if",
        H + "steps:\n  - choice:\n      - {if: ctx.a, when: p, steps: [{task: a}]}\n",
        [(5, 9, "has `when` (a predicate activity) or `if` (an expression), not both")],
    ),
    (
        "expr-arm-neither",
        H + "steps:\n  - choice:\n      - steps: [{task: a}]\n",
        [(5, 9, "a choice arm needs `when` (a predicate activity) or `if` (an expression)")],
    ),
    (
        "expr-set-key",
        H + 'steps:\n  - set: {"not a name": "1"}\n',
        [(4, 10, "'not a name' is not a valid")],
    ),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in BAD], ids=[b[0] for b in BAD])
def test_bad_document_is_located(text: str, expected: list[tuple[int, int, str]]) -> None:
    with pytest.raises(FlowError) as caught:
        load_flow(text, "bad.yaml")
    found = caught.value.diagnostics
    assert len(found) == len(expected), [str(d) for d in found]
    for diagnostic, (line, column, message) in zip(found, expected, strict=True):
        assert diagnostic.file == "bad.yaml"
        assert (diagnostic.line, diagnostic.column) == (line, column), str(diagnostic)
        assert message in diagnostic.message, str(diagnostic)


def test_every_problem_is_reported_in_source_order() -> None:
    text = (
        H + "queue: 5\nsteps:\n  - task: a\n    retry: {max_attempts: 0}\n  - sleep: later\n"
        "  - bogus: 1\n"
    )
    with pytest.raises(FlowError) as caught:
        load_flow(text, "f.yaml")
    lines = [d.line for d in caught.value.diagnostics]
    assert lines == [3, 6, 7, 8]
    assert str(caught.value).startswith("f.yaml:3:8: ")


def test_an_oversized_or_missing_file_is_located_at_1_1(tmp_path) -> None:
    from wiggle.compiler import load_flow_file

    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * 2000)
    with pytest.raises(FlowError) as caught:
        load_flow_file(big, max_bytes=1000)
    (found,) = caught.value.diagnostics
    assert (found.line, found.column) == (1, 1)
    assert "document is 2000 bytes; the limit is 1000 bytes" in found.message
    with pytest.raises(FlowError) as caught:
        load_flow_file(tmp_path / "nope.yaml")
    assert str(caught.value).endswith(
        "nope.yaml:1:1: cannot read the flow: No such file or directory"
    )


def test_diagnostics_carry_json_pointer_paths() -> None:
    with pytest.raises(FlowError) as caught:
        load_flow(H + "steps:\n  - task: a\n    retry: {max_attempts: 0}\n")
    assert caught.value.diagnostics[0].path == "/steps/0/retry/max_attempts"
