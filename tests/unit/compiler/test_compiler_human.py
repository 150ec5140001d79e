"""The `human` block: a human task compiled to an await of `task:<name>` that carries the task.

Expected graphs are written by hand from docs/graph.md; diagnostics are located by counting
the columns of the documents below.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped,unused-ignore]

from wiggle.compiler import graph_from_canonical, load_flow
from wiggle.compiler._schema import load_schema
from wiggle.errors import FlowError
from wiggle.graph import Await, Candidates, Computed, Graph, HumanTask

HEAD = "wiggle: 1\nname: f\n"
RETRY = {"max_attempts": 3, "backoff": "exponential", "initial_ms": 1000, "max_ms": 60000}
DAY = 86_400_000
HOUR = 3_600_000
FORM = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "comment": {"type": "string"}},
    "required": ["approved"],
}


def jcs_ascii(doc: Any) -> bytes:
    """RFC 8785 for ASCII keys and integers only, where json.dumps agrees with JCS."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def task(name: str, next: str) -> dict[str, Any]:
    return {
        "kind": "task",
        "activity": name,
        "queue": "default",
        "retry": RETRY,
        "timeout_ms": 60000,
        "next": next,
        "checkpoint": False,
    }


def graph(start: str, nodes: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": 1,
        "name": "f",
        "execution": "DEFAULT",
        "input": None,
        "start": start,
        "nodes": {**nodes, "end": {"kind": "end"}},
    }


def human(**over: Any) -> dict[str, Any]:
    """The `human` field with every default (docs/graph.md), then `over`."""
    doc: dict[str, Any] = {
        "title": "Approve",
        "instructions": None,
        "form": {"type": "object"},
        "assignee": None,
        "candidates": {"people": [], "groups": []},
        "due_ms": None,
        "remind_ms": [],
        "exclude": [],
        "approvals": 1,
        "into": None,
    }
    return {**doc, **over}


FULL = (
    "steps:\n"
    "  - task: prepare\n"
    "  - human: approve-invoice\n"
    "    title: {expr: \"'Approve invoice ' + string(ctx.number)\"}\n"
    "    instructions: Check the amount against the order.\n"
    "    form:\n"
    "      type: object\n"
    "      properties: {approved: {type: boolean}, comment: {type: string}}\n"
    "      required: [approved]\n"
    "    assignee: alice\n"
    "    candidates: {people: [bob, {expr: ctx.approvers}], groups: [finance]}\n"
    "    due: 2d\n"
    "    remind: [1d, 12h]\n"
    "    exclude: [starter, last_actor]\n"
    "    approvals: 2\n"
    "    timeout: 3d\n"
    "    on_timeout:\n"
    "      - task: escalate\n"
    "    into: decision\n"
    "    description: for the flow's readers only\n"
    "  - task: book\n"
)
FULL_GRAPH = graph(
    "prepare",
    {
        "prepare": task("prepare", "approve-invoice"),
        "approve-invoice": {
            "kind": "await",
            "signal": "task:approve-invoice",
            "timeout_ms": 3 * DAY,
            "on_timeout": "escalate",
            "apply": None,
            "next": "book",
            "human": {
                "title": {"expr": "'Approve invoice ' + string(ctx.number)"},
                "instructions": "Check the amount against the order.",
                "form": FORM,
                "assignee": "alice",
                "candidates": {"people": ["bob", {"expr": "ctx.approvers"}], "groups": ["finance"]},
                "due_ms": 2 * DAY,
                "remind_ms": [12 * HOUR, DAY],  # ascending, whatever the order written
                "exclude": ["last_actor", "starter"],  # sorted
                "approvals": 2,
                "into": "decision",
            },
        },
        "escalate": task("escalate", "book"),
        "book": task("book", "end"),
    },
)


def test_a_human_step_compiles_to_an_await_carrying_its_task() -> None:
    flow = load_flow(HEAD + FULL, "f.yaml")
    assert flow.document == FULL_GRAPH
    assert flow.canonical == jcs_ascii(FULL_GRAPH)
    assert flow.version == "sha256:" + hashlib.sha256(jcs_ascii(FULL_GRAPH)).hexdigest()
    assert flow.graph == Graph.from_json(FULL_GRAPH, flow.version)


def test_the_graph_reader_types_the_task() -> None:
    node = load_flow(HEAD + FULL).graph.nodes["approve-invoice"]
    assert isinstance(node, Await)
    assert node.signal == "task:approve-invoice"
    assert node.human == HumanTask(
        title=Computed("'Approve invoice ' + string(ctx.number)"),
        instructions="Check the amount against the order.",
        form=FORM,
        assignee="alice",
        candidates=Candidates(("bob", Computed("ctx.approvers")), ("finance",)),
        due_ms=2 * DAY,
        remind_ms=(12 * HOUR, DAY),
        exclude=("last_actor", "starter"),
        approvals=2,
        into="decision",
    )


def test_the_graph_is_valid_against_the_graph_schema_and_reads_back() -> None:
    flow = load_flow(HEAD + FULL)
    Draft202012Validator(load_schema("graph")).validate(flow.document)
    again = graph_from_canonical(flow.canonical)
    assert again.version == flow.version
    assert again.graph == flow.graph


def test_a_stored_graph_whose_task_lacks_a_field_is_refused() -> None:
    broken = copy.deepcopy(FULL_GRAPH)
    del broken["nodes"]["approve-invoice"]["human"]["approvals"]
    with pytest.raises(FlowError, match="approvals"):
        graph_from_canonical(jcs_ascii(broken))


def test_a_stored_graph_must_pair_the_task_with_its_signal() -> None:
    renamed = copy.deepcopy(FULL_GRAPH)
    renamed["nodes"]["approve-invoice"]["signal"] = "approve-invoice"
    with pytest.raises(FlowError) as caught:
        graph_from_canonical(jcs_ascii(renamed))
    assert str(caught.value) == (
        "<graph>:0:0: await 'approve-invoice': signal 'approve-invoice' is not "
        "'task:approve-invoice', a human step's"
    )
    bare = copy.deepcopy(FULL_GRAPH)
    del bare["nodes"]["approve-invoice"]["human"]
    with pytest.raises(FlowError, match="is a human step's, but the await has no `human`"):
        graph_from_canonical(jcs_ascii(bare))


def test_defaults_are_filled_in() -> None:
    flow = load_flow(
        HEAD + "steps:\n  - human: ok\n    title: Approve\n    form: {type: object}\n"
        "    candidates: {groups: [finance]}\n"
    )
    expected = graph(
        "ok",
        {
            "ok": {
                "kind": "await",
                "signal": "task:ok",
                "timeout_ms": None,
                "on_timeout": None,
                "apply": None,
                "next": "end",
                "human": human(candidates={"people": [], "groups": ["finance"]}),
            }
        },
    )
    assert flow.document == expected
    assert flow.canonical == jcs_ascii(expected)


def test_apply_takes_the_answer_like_an_awaits_apply() -> None:
    flow = load_flow(
        HEAD + "queue: q0\nsteps:\n  - human: ok\n    title: Approve\n    form: true\n"
        "    assignee: alice\n    apply: record\n    queue: q1\n    retry: {max_attempts: 5}\n"
        "    timeout: 1h\n"
    )
    node = flow.document["nodes"]["ok"]
    # The step's `timeout` is its deadline; the apply activity keeps the default lease.
    assert node["apply"] == {
        "activity": "record",
        "queue": "q1",
        "retry": {**RETRY, "max_attempts": 5},
        "timeout_ms": 60000,
    }
    assert (node["timeout_ms"], node["on_timeout"], node["next"]) == (HOUR, "end", "end")
    assert node["human"] == human(form=True, assignee="alice")


def test_human_steps_nest_like_awaits() -> None:
    flow = load_flow(
        HEAD + "steps:\n  - parallel:\n      a:\n        - human: first\n          title: A\n"
        "          form: {}\n          assignee: alice\n          timeout: 1d\n"
        "          on_timeout:\n            - human: second\n              title: B\n"
        "              form: {}\n              assignee: bob\n"
        "      b: [{task: t}]\n    combine: c\n"
    )
    nodes = flow.document["nodes"]
    assert nodes["parallel-1"]["branches"] == {"a": "first", "b": "t"}
    assert nodes["first"]["on_timeout"] == "second"
    assert nodes["first"]["next"] == nodes["second"]["next"] == "parallel-1.join"
    assert nodes["second"]["signal"] == "task:second"


# -- the version --------------------------------------------------------------------------------


def test_a_flow_without_human_steps_keeps_its_version() -> None:
    # The await as docs/graph.md has always written it: no `human` key at all.
    flow = load_flow(HEAD + "steps:\n  - await: kyc\n    timeout: 1h\n  - task: a\n")
    expected = graph(
        "kyc",
        {
            "kyc": {
                "kind": "await",
                "signal": "kyc",
                "timeout_ms": HOUR,
                "on_timeout": "a",
                "apply": None,
                "next": "a",
            },
            "a": task("a", "end"),
        },
    )
    assert flow.canonical == jcs_ascii(expected)
    assert b"human" not in flow.canonical
    assert flow.version == "sha256:" + hashlib.sha256(jcs_ascii(expected)).hexdigest()
    assert flow.graph.nodes["kyc"] == Await("kyc", "kyc", HOUR, "a", None, "a")


BASE = {
    "human": "ok",
    "title": "Approve",
    "form": {"type": "object", "required": ["approved"]},
    "assignee": "alice",
    "candidates": {"people": ["bob", "carol"], "groups": ["finance"]},
    "timeout": "3d",
}


def _version(step: dict[str, Any]) -> str:
    return load_flow(json.dumps({"wiggle": 1, "name": "f", "steps": [step]})).version


@pytest.mark.parametrize(
    "change",
    [
        {"form": {"type": "object", "required": ["approved", "comment"]}},
        {"form": True},
        {"candidates": {"people": ["bob", "carol", "dave"], "groups": ["finance"]}},
        {"candidates": {"people": ["bob", "carol"], "groups": ["treasury"]}},
        {"candidates": {"people": ["bob", {"expr": "ctx.approver"}], "groups": ["finance"]}},
        {"candidates": {"people": ["bob", "carol"]}},
        # The candidates are kept in their order (an inbox may show them so).
        {"candidates": {"people": ["carol", "bob"], "groups": ["finance"]}},
        {"title": "Approve it"},
        {"title": {"expr": "'Approve'"}},
        {"instructions": "Look closely."},
        {"assignee": "carol"},
        {"due": "1d"},
        {"remind": ["1d"]},
        {"exclude": ["starter"]},
        {"approvals": 2},
        {"into": "decision"},
        {"apply": "record"},
        {"timeout": "2d"},
        {"human": "ok2"},
    ],
    ids=lambda change: ",".join(f"{k}={v}" for k, v in change.items()),
)
def test_what_the_task_says_or_does_is_part_of_the_version(change: dict[str, Any]) -> None:
    assert _version({**BASE, **change}) != _version(BASE)


def test_how_it_is_written_is_not_part_of_the_version() -> None:
    written = {**BASE, "remind": ["1d", "12h"], "exclude": ["starter", "last_actor"]}
    same = {
        **BASE,
        "remind": ["720m", "24h"],
        "exclude": ["last_actor", "starter"],
        "approvals": 1,
        "description": "not in the graph",
    }
    assert _version(written) == _version(same)
    reordered = dict(reversed(list(written.items())))
    assert _version(reordered) == _version(written)


# -- the answer going `into` the context --------------------------------------------------------


def _node(**step: Any) -> Await:
    node = load_flow(json.dumps({"wiggle": 1, "name": "f", "steps": [{**BASE, **step}]})).graph
    found = node.nodes["ok"]
    assert isinstance(found, Await)
    return found


def test_into_puts_the_answer_under_its_key() -> None:
    node = _node(into="decision")
    context = {"a": 1, "decision": "old", "z": 2}
    after = node.signalled(context, {"approved": True})
    assert after == {"a": 1, "decision": {"approved": True}, "z": 2}
    assert list(after) == ["a", "decision", "z"]  # a key it had keeps its place
    assert context == {"a": 1, "decision": "old", "z": 2}  # not changed in place
    assert list(node.signalled({"a": 1}, None)) == ["a", "decision"]


@pytest.mark.parametrize(("context", "words"), [([1], "a list"), (None, "null"), ("x", "a string")])
def test_into_needs_an_object_context(context: Any, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        _node(into="decision").signalled(context, {"approved": True})
    assert str(caught.value) == (
        "human step 'ok' puts its answer under 'decision', which needs an object context; "
        f"the context is {words}"
    )


def test_without_into_the_context_is_unchanged() -> None:
    context = [1, 2]
    assert _node().signalled(context, {"approved": True}) is context
    plain = Await("kyc", "kyc", None, None, None, "end")
    assert plain.signalled(context, {"x": 1}) is context


# -- problems, each at its line and column -----------------------------------------------------

H = "wiggle: 1\nname: x\nsteps:\n"
STEP = "  - human: ok\n    title: Approve\n    form: {type: object}\n"

BAD: list[tuple[str, str, list[tuple[int, int, str]]]] = [
    (
        "no-one-can-take-it",
        H + STEP,
        [(4, 5, "human step 'ok' needs an `assignee` or `candidates`: nobody could take the task")],
    ),
    (
        "form-not-a-schema",
        H + "  - human: ok\n    title: A\n    assignee: a\n    form:\n      type: objekt\n"
        "      properties: {n: {minimum: x}}\n",
        [
            (8, 13, "form is not a valid JSON Schema: 'objekt' is not one of"),
            (9, 33, "form is not a valid JSON Schema: 'x' is not of type 'number'"),
        ],
    ),
    (
        "form-not-a-mapping",
        H + "  - human: ok\n    title: A\n    assignee: a\n    form: 5\n",
        [(7, 11, "form must be of type object or boolean, not integer")],
    ),
    (
        "missing-title-and-form",
        H + "  - human: ok\n    assignee: a\n",
        # Two at one place: in the order of their messages.
        [(4, 5, "missing required key 'form'"), (4, 5, "missing required key 'title'")],
    ),
    (
        "into-and-apply",
        H + STEP + "    assignee: a\n    into: d\n    apply: record\n",
        [(9, 5, "human step 'ok' has both `into` and `apply`")],
    ),
    (
        "queue-and-retry-without-apply",
        H + STEP + "    assignee: a\n    queue: q\n    retry: {max_attempts: 2}\n",
        [
            (8, 5, "`queue` applies to the `apply` activity; human step 'ok' has none"),
            (9, 5, "`retry` applies to the `apply` activity; human step 'ok' has none"),
        ],
    ),
    (
        "approvals-zero",
        H + STEP + "    assignee: a\n    approvals: 0\n",
        [(8, 16, "approvals: 0 is less than the minimum of 1")],
    ),
    (
        "approvals-more-than-the-people-named",
        H + STEP + "    assignee: alice\n    candidates: {people: [bob, alice]}\n"
        "    approvals: 3\n",
        [
            (
                9,
                16,
                "human step 'ok' needs 3 different people to answer, but only 2 may take it "
                "(alice, bob)",
            )
        ],
    ),
    (
        "bad-durations",
        H + STEP + "    assignee: a\n    due: 2 days\n    remind: [0s, 400d]\n",
        [
            (8, 10, "'2 days' is not a valid duration"),
            (9, 14, "duration '0s' must be greater than zero"),
            (9, 18, "duration '400d' is longer than the maximum of 365d"),
        ],
    ),
    (
        "same-reminder-twice",
        H + STEP + "    assignee: a\n    remind: [1d, 24h]\n",
        [(8, 18, "reminder 24h is the same time as reminder 1d")],
    ),
    (
        "due-and-reminder-after-the-deadline",
        H + STEP + "    assignee: a\n    timeout: 2d\n    due: 3d\n    remind: [1d, 2d]\n",
        [
            (9, 10, "would be due 3d after it is created, later than its deadline (timeout 2d)"),
            (10, 18, "reminder 2d would never be sent"),
        ],
    ),
    (
        "on-timeout-without-timeout",
        H + STEP + "    assignee: a\n    on_timeout: [{task: t}]\n",
        [(8, 5, "human step 'ok' has on_timeout steps but no timeout to trigger them")],
    ),
    (
        "into-not-a-name",
        H + STEP + "    assignee: a\n    into: my answer\n",
        [(8, 11, "'my answer' is not a valid context key")],
    ),
    (
        "unknown-exclusion",
        H + STEP + "    assignee: a\n    exclude: [boss]\n",
        [(8, 15, "'boss' is not a valid excluded person: expected one of starter, last_actor")],
    ),
    (
        "empty-title",
        H + "  - human: ok\n    title: ''\n    form: {}\n    assignee: a\n",
        [(5, 12, "title: '' should be non-empty")],
    ),
    (
        "no-id-of-its-own",
        H + STEP + "    assignee: a\n    id: other\n",
        [(8, 5, "unknown key 'id'")],
    ),
    (
        "name-too-long-for-its-signal",
        H + "  - human: " + "a" * 196 + "\n    title: A\n    form: {}\n    assignee: a\n",
        [(4, 12, "human task name: '" + "a" * 196 + "' is too long")],
    ),
    (
        "duplicate-names",
        H + STEP + "    assignee: a\n" + STEP + "    assignee: b\n",
        [(8, 12, "duplicate node id 'ok' (also used at line 4, column 12); give one of the human")],
    ),
    (
        "a-task-named-like-a-human-step",
        H + "  - task: ok\n" + STEP + "    assignee: a\n",
        [(5, 12, "give the other step an `id:`, or the human step another name")],
    ),
    (
        "an-await-cannot-take-a-human-tasks-signal",
        H + "  - await: task:ok\n",
        [(4, 12, "'task:ok' is not a valid node id")],
    ),
    (
        "misspelled-block",
        H + "  - humann: ok\n    title: A\n",
        [(4, 5, "unknown block 'humann' (did you mean 'human'?)")],
    ),
    # Computed values: CEL, type-checked and located inside the string.
    (
        "computed-title-not-a-string",
        H + '  - human: ok\n    title: {expr: "1 + 2"}\n    form: {}\n    assignee: a\n',
        [(5, 20, "expression: the title must be a string; its type is int")],
    ),
    (
        "computed-assignee-unknown-function",
        H + STEP + '    assignee: {expr: "nope(ctx.a)"}\n',
        [(7, 23, "expression: nope() is not a function")],
    ),
    (
        "computed-candidate-not-names",
        H + STEP + "    candidates: {people: [{expr: '[1, 2]'}], groups: [{expr: 'ctx.'}]}\n",
        [
            (
                7,
                35,
                "expression: an entry of candidates.people must be a string or a list of "
                "strings; its type is list<int>",
            ),
            (7, 67, "expression: Syntax error"),  # where the expression ends too early
        ],
    ),
    (
        "computed-instructions-undeclared",
        H + STEP + "    assignee: a\n    instructions: {expr: x}\n",
        [(8, 26, "undeclared reference to 'x'")],
    ),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in BAD], ids=[b[0] for b in BAD])
def test_bad_human_step_is_located(text: str, expected: list[tuple[int, int, str]]) -> None:
    with pytest.raises(FlowError) as caught:
        load_flow(text, "bad.yaml")
    found = caught.value.diagnostics
    assert len(found) == len(expected), [str(d) for d in found]
    for diagnostic, (line, column, message) in zip(found, expected, strict=True):
        assert (diagnostic.line, diagnostic.column) == (line, column), str(diagnostic)
        assert message in diagnostic.message, str(diagnostic)


@pytest.mark.parametrize(
    "values",
    [
        "    title: {expr: \"'Pay ' + ctx.who\"}\n    assignee: {expr: ctx.manager}\n",
        '    candidates: {people: [{expr: "ctx.chain.map(r, r.email)"}]}\n',
        "    candidates: {groups: [{expr: \"ctx.team.split(',')\"}]}\n",
    ],
)
def test_computed_values_of_the_right_type_compile(values: str) -> None:
    text = H + "  - human: ok\n    form: {}\n" + values
    if "title" not in values:
        text += "    title: Approve\n"
    load_flow(text)


def test_a_name_of_195_characters_gives_a_signal_that_fits() -> None:
    name = "a" * 195
    flow = load_flow(H + f"  - human: {name}\n    title: A\n    form: {{}}\n    assignee: a\n")
    node = flow.graph.nodes[name]
    assert isinstance(node, Await)
    assert node.signal == "task:" + name
    assert len(node.signal) == 200
