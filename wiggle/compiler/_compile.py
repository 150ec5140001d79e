"""A schema-valid flow document → the canonical graph's nodes, wired through networkx.

Two passes. The first numbers the blocks (`parallel-N`, `for_each-N`, `sleep-N`, `set-N`, and
the expression forms `filter-N`, `if-N`, `while-N`) in document
order and records which step claimed which node id; the second wires each sequence back to
front, so every node's successor id is known when the node is written. Every field of every
node is written, defaults filled in, so spelling out a default never changes the hash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from wiggle.compiler._durations import parse_duration
from wiggle.compiler._graph import graph_to_nx
from wiggle.compiler._loader import Path
from wiggle.graph import HUMAN_SIGNAL_PREFIX

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "DEFAULT_RETRY",
    "DEFAULT_TIMEOUT_MS",
    "Claim",
    "Compiled",
    "branch_order",
    "compile_flow",
]

DEFAULT_RETRY: dict[str, Any] = {
    "max_attempts": 3,
    "backoff": "exponential",
    "initial_ms": 1000,
    "max_ms": 60000,
}
DEFAULT_TIMEOUT_MS = 60000
DEFAULT_MAX_ITERATIONS = 100
END = "end"


def is_expression_instant(until: str) -> bool:
    """Whether a sleep's `until` is an expression: a JSON pointer is empty or starts with `/`
    (RFC 6901), which no CEL expression can."""
    return until != "" and not until.startswith("/")


@dataclass(frozen=True)
class Claim:
    """A node id and the path of the value that named it (an `id:` or the block's own key)."""

    node_id: str
    path: Path
    at_key: bool = False  # the value is a block (a parallel's branches): point at its key


@dataclass
class Compiled:
    document: dict[str, Any]
    nx: Any  # networkx.DiGraph; untyped library
    claims: list[Claim] = field(default_factory=list)


def branch_order(names: Any) -> list[str]:
    """Branches are numbered and listed in name order (UTF-16 code units, as JCS sorts keys):
    a mapping's key order is formatting and must not change the hash."""
    return sorted(names, key=lambda n: n.encode("utf-16-be"))


class _Compiler:
    def __init__(self, flow: dict[str, Any]) -> None:
        self.flow = flow
        self.queue: str = flow.get("queue", "default")
        self.counters: dict[str, int] = {}
        self.ids: dict[Path, tuple[str, ...]] = {}
        self.claims: list[Claim] = []
        self.nodes: dict[str, dict[str, Any]] = {}

    # -- pass 1: ids, in document order ------------------------------------------------------

    def _claim(self, step: dict[str, Any], path: Path, default: str, *named_by: str) -> str:
        """Record the node id of `step`: its `id:`, else `default`, named at path + named_by."""
        node_id: str = step.get("id", default)
        if "id" in step:
            self.claims.append(Claim(node_id, (*path, "id")))
        else:
            value: Any = step
            for key in named_by:
                value = value[key]
            self.claims.append(Claim(node_id, (*path, *named_by), isinstance(value, dict)))
        return node_id

    def _numbered(self, step: dict[str, Any], path: Path, kind: str) -> str:
        self.counters[kind] = self.counters.get(kind, 0) + 1
        return self._claim(step, path, f"{kind}-{self.counters[kind]}", kind)

    def number(self, steps: list[dict[str, Any]], path: Path) -> None:
        for i, step in enumerate(steps):
            self._number_step(step, (*path, i))

    def _number_step(self, step: dict[str, Any], path: Path) -> None:
        if "task" in step:
            self.ids[path] = (self._claim(step, path, step["task"], "task"),)
        elif "filter" in step:
            if isinstance(step["filter"], dict):
                self.ids[path] = (self._numbered(step, path, "filter"),)
            else:
                self.ids[path] = (self._claim(step, path, step["filter"], "filter"),)
        elif "set" in step:
            self.ids[path] = (self._numbered(step, path, "set"),)
        elif "choice" in step:
            arms = []
            for i, arm in enumerate(step["choice"]):
                arm_path = (*path, "choice", i)
                if "if" in arm:
                    arms.append(self._numbered(arm, arm_path, "if"))
                else:
                    arms.append(self._claim(arm, arm_path, arm["when"], "when"))
                self.number(arm["steps"], (*arm_path, "steps"))
            self.ids[path] = tuple(arms)
            if "otherwise" in step:
                self.number(step["otherwise"], (*path, "otherwise"))
        elif "parallel" in step:
            fork = self._numbered(step, path, "parallel")
            self.claims.append(replace(self.claims[-1], node_id=f"{fork}.join"))
            self.ids[path] = (fork, f"{fork}.join")
            for name in branch_order(step["parallel"]):
                self.number(step["parallel"][name], (*path, "parallel", name))
        elif "for_each" in step:
            fork = self._numbered(step, path, "for_each")
            self.claims.append(replace(self.claims[-1], node_id=f"{fork}.join"))
            self.ids[path] = (fork, f"{fork}.join")
            self.number(step["steps"], (*path, "steps"))
        elif "sleep" in step:
            self.ids[path] = (self._numbered(step, path, "sleep"),)
        elif "await" in step or "human" in step:
            # A human step is an await whose name is its node id (it has no `id:` of its own).
            block = "await" if "await" in step else "human"
            self.ids[path] = (self._claim(step, path, step[block], block),)
            if "on_timeout" in step:
                self.number(step["on_timeout"], (*path, "on_timeout"))
        elif "subflow" in step:
            self.ids[path] = (self._claim(step, path, step["subflow"], "subflow"),)
        elif "loop" in step:
            # The body is written before its `while` predicate, so it is numbered first.
            self.number(step["loop"]["steps"], (*path, "loop", "steps"))
            predicate = step["loop"]["while"]
            if isinstance(predicate, dict):
                self.counters["while"] = self.counters.get("while", 0) + 1
                default = f"while-{self.counters['while']}"
                self.ids[path] = (self._claim(step, path, default, "loop", "while"),)
            else:
                self.ids[path] = (self._claim(step, path, predicate, "loop", "while"),)

    # -- pass 2: wiring, back to front --------------------------------------------------------

    def _activity(self, name: str, step: dict[str, Any]) -> dict[str, Any]:
        retry = dict(DEFAULT_RETRY)
        written = step.get("retry", {})
        if "max_attempts" in written:
            retry["max_attempts"] = written["max_attempts"]
        if "backoff" in written:
            retry["backoff"] = written["backoff"]
        if "initial" in written:
            retry["initial_ms"] = parse_duration(written["initial"])
        if "max" in written:
            retry["max_ms"] = parse_duration(written["max"])
        timeout = step.get("timeout")
        return {
            "activity": name,
            "queue": step.get("queue", self.queue),
            "retry": retry,
            "timeout_ms": DEFAULT_TIMEOUT_MS if timeout is None else parse_duration(timeout),
        }

    def _emit(self, node_id: str, node: dict[str, Any]) -> None:
        # A clashing id keeps the first node; the clash itself is reported by the id check.
        self.nodes.setdefault(node_id, node)

    def sequence(self, steps: list[dict[str, Any]], path: Path, after: str) -> str:
        """Wire `steps` so the last continues to `after`; return the first node's id."""
        nxt = after
        for i in range(len(steps) - 1, -1, -1):
            nxt = self._step(steps[i], (*path, i), nxt)
        return nxt

    def _step(self, step: dict[str, Any], path: Path, after: str) -> str:
        ids = self.ids[path]
        for key, wire in self._WIRING:
            if key in step:
                return wire(self, step, path, ids, after)
        raise AssertionError(f"schema-valid step without a block key at {path}")

    def _task(self, step: dict[str, Any], path: Path, ids: tuple[str, ...], after: str) -> str:
        node = {"kind": "task", **self._activity(step["task"], step), "next": after}
        node["checkpoint"] = step.get("checkpoint", False)
        self._emit(ids[0], node)
        return ids[0]

    def _decision(
        self, written: Any, step: dict[str, Any], nxt: str, alt: str | None, limit: int | None
    ) -> dict[str, Any]:
        """A predicate node for an activity name, a condition node for `{if: expression}`."""
        if isinstance(written, dict):
            node: dict[str, Any] = {"kind": "condition", "if": written["if"], "next": nxt}
        else:
            node = {"kind": "predicate", **self._activity(written, step), "next": nxt}
        node.update(alt=alt, max_iterations=limit)
        return node

    def _filter(self, step: dict[str, Any], path: Path, ids: tuple[str, ...], after: str) -> str:
        self._emit(ids[0], self._decision(step["filter"], step, after, None, None))
        return ids[0]

    def _set(self, step: dict[str, Any], path: Path, ids: tuple[str, ...], after: str) -> str:
        self._emit(ids[0], {"kind": "set", "values": dict(step["set"]), "next": after})
        return ids[0]

    def _choice(self, step: dict[str, Any], path: Path, ids: tuple[str, ...], after: str) -> str:
        alt = after
        if "otherwise" in step:
            alt = self.sequence(step["otherwise"], (*path, "otherwise"), after)
        for i in range(len(step["choice"]) - 1, -1, -1):
            arm = step["choice"][i]
            first = self.sequence(arm["steps"], (*path, "choice", i, "steps"), after)
            written = {"if": arm["if"]} if "if" in arm else arm["when"]
            self._emit(ids[i], self._decision(written, arm, first, alt, None))
            alt = ids[i]
        return alt

    def _parallel(self, step: dict[str, Any], path: Path, ids: tuple[str, ...], after: str) -> str:
        fork, join = ids
        branches = {}
        for name in branch_order(step["parallel"]):
            branch = step["parallel"][name]
            branches[name] = self.sequence(branch, (*path, "parallel", name), join)
        self._emit(fork, {"kind": "fork", "branches": branches, "join": join})
        self._join(step, fork, join, after)
        return fork

    def _join(self, step: dict[str, Any], fork: str, join: str, after: str) -> None:
        node = {"kind": "join", **self._activity(step["combine"], step), "fork": fork}
        node["next"] = after
        self._emit(join, node)

    def _for_each(self, step: dict[str, Any], path: Path, ids: tuple[str, ...], after: str) -> str:
        fork, join = ids
        body = self.sequence(step["steps"], (*path, "steps"), join)
        node = {"kind": "foreach", "items": step["for_each"], "body": body, "join": join}
        node["max_concurrency"] = step.get("max_concurrency")
        self._emit(fork, node)
        self._join(step, fork, join, after)
        return fork

    def _sleep(self, step: dict[str, Any], path: Path, ids: tuple[str, ...], after: str) -> str:
        spec = step["sleep"]
        duration = parse_duration(spec) if isinstance(spec, str) else None
        until = None if isinstance(spec, str) else spec["until"]
        node = {"kind": "sleep", "duration_ms": duration, "until": until, "next": after}
        if until is not None and is_expression_instant(until):
            node["until"], node["until_expression"] = None, until
        self._emit(ids[0], node)
        return ids[0]

    def _await(self, step: dict[str, Any], path: Path, ids: tuple[str, ...], after: str) -> str:
        self._emit(ids[0], self._await_node(step, path, step["await"], after))
        return ids[0]

    def _await_node(
        self, step: dict[str, Any], path: Path, signal: str, after: str
    ) -> dict[str, Any]:
        timeout_ms = parse_duration(step["timeout"]) if "timeout" in step else None
        on_timeout = None
        if timeout_ms is not None:
            on_timeout = after
            if "on_timeout" in step:
                on_timeout = self.sequence(step["on_timeout"], (*path, "on_timeout"), after)
        apply = None
        if "apply" in step:
            # The await's `timeout` is its deadline, so the apply activity keeps the default lease.
            apply = self._activity(step["apply"], {k: v for k, v in step.items() if k != "timeout"})
        node: dict[str, Any] = {"kind": "await", "signal": signal, "timeout_ms": timeout_ms}
        node.update(on_timeout=on_timeout, apply=apply, next=after)
        return node

    def _human(self, step: dict[str, Any], path: Path, ids: tuple[str, ...], after: str) -> str:
        """An await of the signal `task:<name>` that carries the task (`human`, only here)."""
        node = self._await_node(step, path, HUMAN_SIGNAL_PREFIX + step["human"], after)
        node["human"] = _human_task(step)
        self._emit(ids[0], node)
        return ids[0]

    def _subflow(self, step: dict[str, Any], path: Path, ids: tuple[str, ...], after: str) -> str:
        node = {"kind": "subflow", "flow": step["subflow"], "version": step.get("version")}
        node["next"] = after
        self._emit(ids[0], node)
        return ids[0]

    def _loop(self, step: dict[str, Any], path: Path, ids: tuple[str, ...], after: str) -> str:
        loop = step["loop"]
        check = ids[0]
        body = self.sequence(loop["steps"], (*path, "loop", "steps"), check)
        limit = loop.get("max_iterations", DEFAULT_MAX_ITERATIONS)
        self._emit(check, self._decision(loop["while"], step, body, after, limit))
        return body

    _Wire = Callable[["_Compiler", dict[str, Any], Path, tuple[str, ...], str], str]
    _WIRING: tuple[tuple[str, _Wire], ...] = (
        ("task", _task),
        ("filter", _filter),
        ("choice", _choice),
        ("parallel", _parallel),
        ("for_each", _for_each),
        ("sleep", _sleep),
        ("await", _await),
        ("subflow", _subflow),
        ("loop", _loop),
        ("set", _set),
        ("human", _human),
    )


def _human_task(step: dict[str, Any]) -> dict[str, Any]:
    """The `human` field of a human step's await: every field present, defaults filled in.

    Texts and people are kept as written (a string, or `{"expr": ...}`), the candidates in
    their order; the reminders become milliseconds in ascending order and `exclude` is sorted,
    so that writing either in another order keeps the version."""
    candidates = step.get("candidates", {})
    return {
        "title": step["title"],
        "instructions": step.get("instructions"),
        "form": step["form"],
        "assignee": step.get("assignee"),
        "candidates": {
            "people": list(candidates.get("people", [])),
            "groups": list(candidates.get("groups", [])),
        },
        "due_ms": parse_duration(step["due"]) if "due" in step else None,
        "remind_ms": sorted(parse_duration(r) for r in step.get("remind", [])),
        "exclude": sorted(step.get("exclude", [])),
        "approvals": step.get("approvals", 1),
        "into": step.get("into"),
    }


def compile_flow(flow: dict[str, Any]) -> Compiled:
    """Compile a schema-valid flow whose durations are in range. Never raises on such input."""
    compiler = _Compiler(flow)
    compiler.number(flow["steps"], ("steps",))
    compiler.nodes[END] = {"kind": "end"}
    start = compiler.sequence(flow["steps"], ("steps",), END)
    # Wiring ran back to front; list the nodes as written (the JSON order is not hashed).
    ordered = {c.node_id: compiler.nodes[c.node_id] for c in compiler.claims}
    ordered.setdefault(END, compiler.nodes[END])
    document = {
        "format": 1,
        "name": flow["name"],
        "execution": flow.get("execution", "DEFAULT"),
        "input": flow.get("input"),
        "start": start,
        "nodes": ordered,
    }
    search = _search(flow.get("search") or {})
    if search:  # absent when none is declared: flows without one keep their version
        document["search"] = search
    return Compiled(document, graph_to_nx(document), compiler.claims)


def _search(declared: dict[str, Any]) -> dict[str, dict[str, str]]:
    """`name: /pointer` is a string attribute; the long form names its type."""
    out: dict[str, dict[str, str]] = {}
    for name, spec in declared.items():
        if isinstance(spec, str):
            out[name] = {"pointer": spec, "type": "string"}
        else:
            out[name] = {"pointer": spec["pointer"], "type": spec.get("type", "string")}
    return out
