"""Hand-written canonical graphs (docs/graph.md) and a reader for the DOT text `to_dot` writes.

The renderer's unit tests never run the compiler: each builds the graph document it needs, so a
failure points at the renderer alone. `to_dot` writes one statement per line, which is what lets
the reader below stay a few regular expressions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from wiggle.graph import Graph

VERSION = "sha256:" + "0123456789abcdef" * 4


def _activity(activity: str, queue: str = "default", **over: Any) -> dict[str, Any]:
    retry = {"max_attempts": 3, "backoff": "exponential", "initial_ms": 1000, "max_ms": 60000}
    retry.update(over.pop("retry", {}))
    return {
        "activity": activity,
        "queue": queue,
        "retry": retry,
        "timeout_ms": over.pop("timeout_ms", 60000),
    }


def task(activity: str, next: str, queue: str = "default", checkpoint: bool = False, **over: Any):
    return {
        "kind": "task",
        **_activity(activity, queue, **over),
        "next": next,
        "checkpoint": checkpoint,
    }


def predicate(activity, next, alt, max_iterations=None, queue="default", **over):
    node = {"kind": "predicate", **_activity(activity, queue, **over)}
    return {**node, "next": next, "alt": alt, "max_iterations": max_iterations}


def condition(expression, next, alt, max_iterations=None):
    return {
        "kind": "condition",
        "if": expression,
        "next": next,
        "alt": alt,
        "max_iterations": max_iterations,
    }


def set_values(values, next):
    return {"kind": "set", "values": values, "next": next}


def fork(branches, join):
    return {"kind": "fork", "branches": branches, "join": join}


def join(activity, fork, next, queue="default", **over):
    return {"kind": "join", **_activity(activity, queue, **over), "fork": fork, "next": next}


def foreach(items, body, join, max_concurrency=None):
    return {
        "kind": "foreach",
        "items": items,
        "body": body,
        "join": join,
        "max_concurrency": max_concurrency,
    }


def sleep(next, duration_ms=None, until=None):
    return {"kind": "sleep", "duration_ms": duration_ms, "until": until, "next": next}


def await_(signal, next, timeout_ms=None, on_timeout=None, apply=None, queue="default"):
    applied = None if apply is None else _activity(apply, queue)
    return {
        "kind": "await",
        "signal": signal,
        "timeout_ms": timeout_ms,
        "on_timeout": on_timeout,
        "apply": applied,
        "next": next,
    }


def subflow(flow, next, version=None):
    return {"kind": "subflow", "flow": flow, "version": version, "next": next}


def graph(start: str, nodes: dict[str, Any], name: str = "example", execution: str = "DEFAULT"):
    doc = {
        "format": 1,
        "name": name,
        "execution": execution,
        "input": None,
        "start": start,
        "nodes": {**nodes, "end": {"kind": "end"}},
    }
    return Graph.from_json(doc, VERSION)


@pytest.fixture
def g() -> SimpleNamespace:
    """The graph builders: g.task(...), g.fork(...), ..., g.graph(start, nodes)."""
    return SimpleNamespace(
        task=task,
        predicate=predicate,
        condition=condition,
        set_values=set_values,
        fork=fork,
        join=join,
        foreach=foreach,
        sleep=sleep,
        await_=await_,
        subflow=subflow,
        graph=graph,
    )


# -- reading DOT ---------------------------------------------------------------------------------

_ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|<.*?>(?=, \w+=|\]$))')
_NODE = re.compile(r'^"((?:[^"\\]|\\.)*)"(?: \[(.*)\])?$')
_EDGE = re.compile(r'^"((?:[^"\\]|\\.)*)" -> "((?:[^"\\]|\\.)*)"(?: \[(.*)\])?$')
_CLUSTER = re.compile(r'^subgraph "(cluster_[^"]*)" \{$')
_GRAPH_ATTR = re.compile(r'^(\w+)=("(?:[^"\\]|\\.)*"|<.*>)$')


def _attrs(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    out = {}
    for key, value in _ATTR.findall(text + "]"):
        out[key] = value[1:-1]  # the quotes, or the outer <> of an HTML-like label
    return out


@dataclass
class Dot:
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    edges: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    # node id -> the clusters it is nested in, outermost first
    clusters_of: dict[str, tuple[str, ...]] = field(default_factory=dict)
    cluster_attrs: dict[str, dict[str, str]] = field(default_factory=dict)
    cluster_parent: dict[str, str | None] = field(default_factory=dict)

    def edge(self, source: str, target: str) -> dict[str, str]:
        found = [a for s, t, a in self.edges if (s, t) == (source, target)]
        assert len(found) == 1, f"{len(found)} edges {source} -> {target}"
        return found[0]

    def cluster(self, node_id: str) -> str | None:
        path = self.clusters_of[node_id]
        return path[-1] if path else None


def read_dot(text: str) -> Dot:
    dot = Dot()
    stack: list[str] = []
    for raw in text.splitlines()[1:-1]:
        line = raw.strip()
        if m := _CLUSTER.match(line):
            dot.cluster_parent[m.group(1)] = stack[-1] if stack else None
            dot.cluster_attrs[m.group(1)] = {}
            stack.append(m.group(1))
        elif line == "}":
            stack.pop()
        elif m := _EDGE.match(line):
            dot.edges.append((m.group(1), m.group(2), _attrs(m.group(3))))
        elif m := _NODE.match(line):
            dot.nodes[m.group(1)] = _attrs(m.group(2))
            dot.clusters_of[m.group(1)] = tuple(stack)
        elif stack and (m := _GRAPH_ATTR.match(line)):
            value = m.group(2)
            dot.cluster_attrs[stack[-1]][m.group(1)] = (
                value[1:-1] if value.startswith('"') else value
            )
    return dot


@pytest.fixture
def dot_of():
    """to_dot(graph, **kw) read back into nodes, edges and clusters."""
    from wiggle_render import to_dot

    def read(graph_: Graph, **kwargs: Any) -> Dot:
        return read_dot(to_dot(graph_, **kwargs))

    return read
