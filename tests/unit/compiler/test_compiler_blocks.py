"""Every block and option, compiled and compared with a graph written by hand from docs/graph.md."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from wiggle.compiler import load_flow
from wiggle.graph import Graph

# -- hand-written node builders (docs/graph.md), independent of the compiler -------------------

RETRY = {"max_attempts": 3, "backoff": "exponential", "initial_ms": 1000, "max_ms": 60000}


def act(
    name: str, queue: str = "default", retry: dict[str, Any] | None = None, timeout_ms: int = 60000
) -> dict[str, Any]:
    return {
        "activity": name,
        "queue": queue,
        "retry": {**RETRY, **(retry or {})},
        "timeout_ms": timeout_ms,
    }


def task(name: str, next: str, *, checkpoint: bool = False, **kw: Any) -> dict[str, Any]:
    return {"kind": "task", **act(name, **kw), "next": next, "checkpoint": checkpoint}


def pred(
    name: str, next: str, alt: str | None = None, max_iterations: int | None = None, **kw: Any
) -> dict[str, Any]:
    node = {"kind": "predicate", **act(name, **kw), "next": next, "alt": alt}
    return {**node, "max_iterations": max_iterations}


def cond(
    source: str, next: str, alt: str | None = None, max_iterations: int | None = None
) -> dict[str, Any]:
    node = {"kind": "condition", "if": source, "next": next, "alt": alt}
    return {**node, "max_iterations": max_iterations}


def join(name: str, fork: str, next: str, **kw: Any) -> dict[str, Any]:
    return {"kind": "join", **act(name, **kw), "fork": fork, "next": next}


def graph(
    start: str,
    nodes: dict[str, Any],
    *,
    name: str = "f",
    execution: str = "DEFAULT",
    input: Any = None,
) -> dict[str, Any]:
    return {
        "format": 1,
        "name": name,
        "execution": execution,
        "input": input,
        "start": start,
        "nodes": {**nodes, "end": {"kind": "end"}},
    }


def jcs_ascii(doc: Any) -> bytes:
    """RFC 8785 for ASCII keys and integers only, where json.dumps agrees with JCS."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


HEAD = "wiggle: 1\nname: f\n"

# (case id, flow text after HEAD, expected graph)
CASES: list[tuple[str, str, dict[str, Any]]] = [
    (
        "task",
        "steps:\n  - task: a\n  - task: b\n",
        graph("a", {"a": task("a", "b"), "b": task("b", "end")}),
    ),
    (
        "task-options",
        "queue: q0\nsteps:\n"
        "  - task: a\n    id: first\n    queue: q1\n    timeout: 30s\n    checkpoint: true\n"
        "    retry: {max_attempts: 5, backoff: fixed, initial: 250ms, max: 2m}\n"
        "    description: not in the graph\n"
        "  - task: a\n",
        graph(
            "first",
            {
                "first": task(
                    "a",
                    "a",
                    checkpoint=True,
                    queue="q1",
                    timeout_ms=30000,
                    retry={
                        "max_attempts": 5,
                        "backoff": "fixed",
                        "initial_ms": 250,
                        "max_ms": 120000,
                    },
                ),
                "a": task("a", "end", queue="q0"),
            },
        ),
    ),
    (
        "retry-partial",
        "steps:\n  - task: a\n    retry: {max_attempts: 1}\n  - task: b\n    retry: {max: 1h}\n",
        graph(
            "a",
            {
                "a": task("a", "b", retry={"max_attempts": 1}),
                "b": task("b", "end", retry={"max_ms": 3600000}),
            },
        ),
    ),
    (
        "flow-options",
        "description: doc\nexecution: LOCAL_ASYNC\ninput: {type: object, required: [x]}\n"
        "steps: [{task: a}]\n",
        graph(
            "a",
            {"a": task("a", "end")},
            execution="LOCAL_ASYNC",
            input={"type": "object", "required": ["x"]},
        ),
    ),
    (
        "filter",
        "steps:\n  - filter: ok\n    queue: p\n  - task: a\n",
        graph("ok", {"ok": pred("ok", "a", queue="p"), "a": task("a", "end")}),
    ),
    (
        "choice",
        "steps:\n  - choice:\n      - when: p1\n        steps: [{task: a}]\n"
        "      - when: p2\n        id: second\n        timeout: 5s\n"
        "        steps: [{task: b}, {task: c}]\n"
        "    otherwise: [{task: d}]\n  - task: z\n",
        graph(
            "p1",
            {
                "p1": pred("p1", "a", "second"),
                "a": task("a", "z"),
                "second": pred("p2", "b", "d", timeout_ms=5000),
                "b": task("b", "c"),
                "c": task("c", "z"),
                "d": task("d", "z"),
                "z": task("z", "end"),
            },
        ),
    ),
    (
        "choice-no-otherwise-last",
        "steps:\n  - choice:\n      - when: p\n        steps: [{task: a}]\n",
        graph("p", {"p": pred("p", "a", "end"), "a": task("a", "end")}),
    ),
    (
        "parallel",
        "steps:\n  - parallel:\n      pay: [{task: a}, {task: b}]\n      ship: [{task: c}]\n"
        "    combine: merge\n    queue: m\n    retry: {max_attempts: 2}\n  - task: z\n",
        graph(
            "parallel-1",
            {
                "parallel-1": {
                    "kind": "fork",
                    "branches": {"pay": "a", "ship": "c"},
                    "join": "parallel-1.join",
                },
                "a": task("a", "b"),
                "b": task("b", "parallel-1.join"),
                "c": task("c", "parallel-1.join"),
                "parallel-1.join": join(
                    "merge", "parallel-1", "z", queue="m", retry={"max_attempts": 2}
                ),
                "z": task("z", "end"),
            },
        ),
    ),
    (
        "parallel-id-nested",
        "steps:\n  - parallel:\n      b: [{sleep: 2s}]\n      a:\n"
        "        - parallel: {x: [{sleep: 1s}]}\n"
        "          combine: inner\n    combine: outer\n    id: fan\n",
        graph(
            "fan",
            {
                "fan": {
                    "kind": "fork",
                    "branches": {"a": "parallel-2", "b": "sleep-2"},
                    "join": "fan.join",
                },
                "parallel-2": {
                    "kind": "fork",
                    "branches": {"x": "sleep-1"},
                    "join": "parallel-2.join",
                },
                "sleep-1": {
                    "kind": "sleep",
                    "duration_ms": 1000,
                    "until": None,
                    "next": "parallel-2.join",
                },
                "parallel-2.join": join("inner", "parallel-2", "fan.join"),
                "sleep-2": {
                    "kind": "sleep",
                    "duration_ms": 2000,
                    "until": None,
                    "next": "fan.join",
                },
                "fan.join": join("outer", "fan", "end"),
            },
        ),
    ),
    (
        "for_each",
        "steps:\n  - for_each: /items\n    steps: [{task: a}]\n    combine: c\n"
        "    max_concurrency: 4\n    timeout: 2m\n  - for_each: ''\n    id: all\n"
        "    steps: [{task: b}]\n    combine: c\n",
        graph(
            "for_each-1",
            {
                "for_each-1": {
                    "kind": "foreach",
                    "items": "/items",
                    "body": "a",
                    "join": "for_each-1.join",
                    "max_concurrency": 4,
                },
                "a": task("a", "for_each-1.join"),
                "for_each-1.join": join("c", "for_each-1", "all", timeout_ms=120000),
                "all": {
                    "kind": "foreach",
                    "items": "",
                    "body": "b",
                    "join": "all.join",
                    "max_concurrency": None,
                },
                "b": task("b", "all.join"),
                "all.join": join("c", "all", "end"),
            },
        ),
    ),
    (
        "sleep",
        "steps:\n  - sleep: 250ms\n  - sleep: {until: /a~1b/0}\n    id: wake\n  - sleep: 1d\n",
        graph(
            "sleep-1",
            {
                "sleep-1": {"kind": "sleep", "duration_ms": 250, "until": None, "next": "wake"},
                "wake": {
                    "kind": "sleep",
                    "duration_ms": None,
                    "until": "/a~1b/0",
                    "next": "sleep-3",
                },
                "sleep-3": {"kind": "sleep", "duration_ms": 86400000, "until": None, "next": "end"},
            },
        ),
    ),
    (
        "await-plain",
        "steps:\n  - await: go\n  - task: a\n",
        graph(
            "go",
            {
                "go": {
                    "kind": "await",
                    "signal": "go",
                    "timeout_ms": None,
                    "on_timeout": None,
                    "apply": None,
                    "next": "a",
                },
                "a": task("a", "end"),
            },
        ),
    ),
    (
        "await-timeout-no-steps",
        "steps:\n  - await: go\n    timeout: 2h\n    apply: merge\n    queue: s\n"
        "    retry: {backoff: fixed}\n",
        graph(
            "go",
            {
                "go": {
                    "kind": "await",
                    "signal": "go",
                    "timeout_ms": 7200000,
                    "on_timeout": "end",
                    "apply": act("merge", queue="s", retry={"backoff": "fixed"}),
                    "next": "end",
                }
            },
        ),
    ),
    (
        "await-on-timeout",
        "steps:\n  - await: kyc\n    id: wait\n    timeout: 5m\n"
        "    on_timeout: [{task: esc}, {task: esc2}]\n"
        "  - task: a\n",
        graph(
            "wait",
            {
                "wait": {
                    "kind": "await",
                    "signal": "kyc",
                    "timeout_ms": 300000,
                    "on_timeout": "esc",
                    "apply": None,
                    "next": "a",
                },
                "esc": task("esc", "esc2"),
                "esc2": task("esc2", "a"),
                "a": task("a", "end"),
            },
        ),
    ),
    (
        "subflow",
        "steps:\n  - subflow: child.v2\n  - subflow: child.v2\n    id: pinned\n    version: sha256:"
        + "ab" * 32
        + "\n",
        graph(
            "child.v2",
            {
                "child.v2": {
                    "kind": "subflow",
                    "flow": "child.v2",
                    "version": None,
                    "next": "pinned",
                },
                "pinned": {
                    "kind": "subflow",
                    "flow": "child.v2",
                    "version": "sha256:" + "ab" * 32,
                    "next": "end",
                },
            },
        ),
    ),
    (
        "loop",
        "steps:\n  - loop:\n      steps: [{task: a}, {task: b}]\n      while: more\n"
        "    queue: lq\n  - loop: {steps: [{task: c}], while: more, max_iterations: 7}\n"
        "    id: again\n",
        graph(
            "a",
            {
                "a": task("a", "b"),
                "b": task("b", "more"),
                "more": pred("more", "a", "c", 100, queue="lq"),
                "c": task("c", "again"),
                "again": pred("more", "c", "end", 7),
            },
        ),
    ),
    (
        "filter-in-branch-and-loop-in-foreach",
        "steps:\n  - for_each: /xs\n    steps:\n      - filter: keep\n"
        "      - loop: {steps: [{task: w}], while: p}\n    combine: c\n",
        graph(
            "for_each-1",
            {
                "for_each-1": {
                    "kind": "foreach",
                    "items": "/xs",
                    "body": "keep",
                    "join": "for_each-1.join",
                    "max_concurrency": None,
                },
                "keep": pred("keep", "w"),
                "w": task("w", "p"),
                "p": pred("p", "w", "for_each-1.join", 100),
                "for_each-1.join": join("c", "for_each-1", "end"),
            },
        ),
    ),
    # Expressions (docs/flow-format.md, "Expressions"): kept as written, no activity options.
    (
        "choice-if-beside-when",
        "steps:\n  - choice:\n      - if: ctx.n >= 10\n        steps: [{task: big}]\n"
        "      - when: odd\n        steps: [{task: o}]\n"
        '      - if: "ctx.n  <  0"\n        id: negative\n        steps: [{task: neg}]\n'
        "    otherwise: [{task: small}]\n",
        graph(
            "if-1",
            {
                "if-1": cond("ctx.n >= 10", "big", "odd"),
                "big": task("big", "end"),
                "odd": pred("odd", "o", "negative"),
                "o": task("o", "end"),
                "negative": cond("ctx.n  <  0", "neg", "small"),
                "neg": task("neg", "end"),
                "small": task("small", "end"),
            },
        ),
    ),
    (
        "filter-if",
        'steps:\n  - filter: {if: "size(ctx.items) > 0"}\n  - task: a\n',
        graph("filter-1", {"filter-1": cond("size(ctx.items) > 0", "a"), "a": task("a", "end")}),
    ),
    (
        "loop-while-if",
        "steps:\n  - loop:\n      steps: [{task: inc}]\n      while: {if: ctx.n < 3}\n"
        "      max_iterations: 7\n",
        graph(
            "inc", {"inc": task("inc", "while-1"), "while-1": cond("ctx.n < 3", "inc", "end", 7)}
        ),
    ),
    (
        "set",
        'steps:\n  - set: {total: ctx.a + ctx.b, ok: "true"}\n  - set: {x: "1"}\n    id: one\n',
        graph(
            "set-1",
            {
                "set-1": {
                    "kind": "set",
                    "values": {"total": "ctx.a + ctx.b", "ok": "true"},
                    "next": "one",
                },
                "one": {"kind": "set", "values": {"x": "1"}, "next": "end"},
            },
        ),
    ),
    (
        "sleep-until-expression",
        "steps:\n  - sleep: {until: \"timestamp(ctx.t) + duration('1h')\"}\n",
        graph(
            "sleep-1",
            {
                "sleep-1": {
                    "kind": "sleep",
                    "duration_ms": None,
                    "until": None,
                    "until_expression": "timestamp(ctx.t) + duration('1h')",
                    "next": "end",
                },
            },
        ),
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [(t, e) for _, t, e in CASES], ids=[c[0] for c in CASES]
)
def test_block_compiles_to_hand_written_graph(text: str, expected: dict[str, Any]) -> None:
    flow = load_flow(HEAD + text, "f.yaml")
    assert flow.document == expected
    assert flow.canonical == jcs_ascii(expected)
    assert flow.version == "sha256:" + hashlib.sha256(jcs_ascii(expected)).hexdigest()
    assert flow.name == "f"
    assert flow.graph == Graph.from_json(expected, flow.version)


def test_writing_a_default_never_changes_the_hash() -> None:
    implicit = load_flow(HEAD + "steps: [{task: a}]\n")
    explicit = load_flow(
        HEAD + "execution: DEFAULT\nqueue: default\nsteps:\n  - task: a\n    id: a\n"
        "    queue: default\n    timeout: 60s\n    checkpoint: false\n"
        "    retry: {max_attempts: 3, backoff: exponential, initial: 1s, max: 1m}\n"
    )
    assert implicit.version == explicit.version


def test_descriptions_are_not_hashed() -> None:
    plain = load_flow(HEAD + "steps: [{task: a}]\n")
    documented = load_flow(HEAD + "description: hi\nsteps: [{task: a, description: there}]\n")
    assert plain.canonical == documented.canonical


def test_networkx_graph_carries_nodes_and_labelled_edges() -> None:
    flow = load_flow(
        HEAD + "steps:\n  - parallel: {x: [{task: a}]}\n    combine: c\n"
        "  - for_each: /i\n    steps: [{task: b}]\n    combine: c\n"
        "  - await: s\n    timeout: 1s\n    on_timeout: [{task: t}]\n"
        "  - loop: {steps: [{task: l}], while: p}\n"
    )
    g = flow.nx
    assert set(g.nodes) == set(flow.document["nodes"])
    assert g.nodes["a"]["kind"] == "task"
    labels = {(u, v): d["label"] for u, v, d in g.edges(data=True)}
    assert labels[("parallel-1", "a")] == "branch:x"
    assert labels[("parallel-1", "parallel-1.join")] == "join"
    assert labels[("for_each-1", "b")] == "body"
    assert labels[("s", "t")] == "on_timeout"
    assert labels[("p", "l")] == "next"
    assert labels[("p", "end")] == "alt"
    assert labels[("parallel-1.join", "for_each-1")] == "next"


def test_await_without_steps_reaches_next_both_ways() -> None:
    flow = load_flow(HEAD + "steps:\n  - await: s\n    timeout: 1s\n")
    assert flow.nx.edges["s", "end"]["labels"] == ["next", "on_timeout"]
