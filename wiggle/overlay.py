"""What an instance looks like on its graph: per node, its tokens' states and what happened there.

One pure computation (no clock, no I/O) shared by `wiggle render --instance` (tools/render) and
the console, so the two never draw the same instance differently. It reads an instance as
DescribeInstance answers it with its whole event log: its status and reason, every token (done
ones too) and every event.

    node_states(graph, status, reason, tokens, events) -> {node_id: {state: count}}

What a node shows (docs/console.md, "What the graph shows"):

- a live token counts at its node in its state (READY, RUNNING, WAITING, AWAITING, JOINED; a
  leased token is RUNNING, the word an operator expects);
- DONE n: how many times a token went past the node. A task, predicate, condition, set or
  join (its combine) and an await with an apply step count their `step_completed` events; an
  await without one its `signal_consumed` events; an await also its deadline's `timer_fired`; a
  sleep its `timer_fired`, or, when it had nothing to wait for (an `until` in the past), the
  arrivals at the node after it; a subflow its children that completed; a fork or for_each the
  combines started at its join; the end the token that reached it;
- FAILED 1: where a FAILED instance failed (the node its reason names);
- CANCELLED n: the tokens the end of the instance cut off there (a cancel, or a failure on
  another branch), a for_each's held elements included.

A token that finished normally leaves nothing more: a branch that arrived at its join, a branch
(or an instance) a filter ended.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from wiggle.graph import (
    Await,
    Condition,
    ForEach,
    Fork,
    Graph,
    Join,
    Node,
    Predicate,
    SetValues,
    Sleep,
    Subflow,
    Task,
)

__all__ = ["EventLike", "TokenLike", "failed_node", "node_states"]


class TokenLike(Protocol):
    """What the overlay reads of a token (the client's and the console's tokens have these)."""

    @property
    def token_id(self) -> str: ...

    @property
    def node_id(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def parent_token_id(self) -> str: ...


class EventLike(Protocol):
    """What the overlay reads of an event."""

    @property
    def kind(self) -> str: ...

    @property
    def node_id(self) -> str: ...

    @property
    def detail(self) -> Any: ...


# The engine names the failed node first in every reason it writes for a FAILED instance:
# "step 'x' failed ...", "sleep 'x': ...", "for_each 'x': ...", "subflow 'x': ...",
# "loop 'x' exceeded ...". Node ids are letters, digits, `_`, `.` and `-` (docs/graph.md).
_FAILED_AT = re.compile(r"^(?:step|sleep|for_each|subflow|loop) '([A-Za-z0-9_][A-Za-z0-9_.-]*)'")


def failed_node(reason: str) -> str:
    """The node a FAILED instance's reason names as where it failed; "" when it names none."""
    match = _FAILED_AT.match(reason)
    return match.group(1) if match else ""


def _shown(state: str) -> str:
    return "RUNNING" if state == "LEASED" else state


class _Log:
    """The event log, counted per node and kind."""

    def __init__(self, events: Iterable[EventLike]) -> None:
        self.completed: Counter[str] = Counter()
        self.consumed: Counter[str] = Counter()
        self.timers: Counter[tuple[str, str]] = Counter()
        self.children_done: Counter[str] = Counter()
        self.filtered: Counter[str] = Counter()
        self.last_failed_step = ""
        for ev in events:
            kind, node = ev.kind, ev.node_id
            detail = ev.detail if isinstance(ev.detail, Mapping) else {}
            if kind == "step_completed":
                self.completed[node] += 1
            elif kind == "signal_consumed":
                self.consumed[node] += 1
            elif kind == "timer_fired":
                self.timers[node, str(detail.get("timer", ""))] += 1
            elif kind == "child_finished" and detail.get("status") == "COMPLETED":
                self.children_done[node] += 1
            elif kind == "branch_filtered":
                self.filtered[node] += 1
            elif kind == "step_failed":
                self.last_failed_step = node


def _passes(node: Node, log: _Log) -> int:
    """How many times the node's own events say a token went past it."""
    if isinstance(node, Task | Predicate | Join | Condition | SetValues):
        return log.completed[node.id]
    if isinstance(node, Await):
        by_signal = log.completed[node.id] if node.apply is not None else log.consumed[node.id]
        return by_signal + log.timers[node.id, "await_timeout"]
    if isinstance(node, Sleep):
        return log.timers[node.id, "sleep"]
    if isinstance(node, Subflow):
        return log.children_done[node.id]
    return 0  # fork, for_each (counted at their join), end (counted by its token)


class _Tokens:
    """The tokens sorted by what they say: live ones by node and state, arrivals at joins,
    combines under way, and the done tokens left standing where the instance ended."""

    def __init__(self, graph: Graph, tokens: Iterable[TokenLike]) -> None:
        self.live: dict[str, Counter[str]] = {}
        self.arrived: Counter[str] = Counter()  # branches at their join (JOINED or done)
        self.combining: Counter[str] = Counter()  # fork/for_each tokens at the join: combines
        self.ended: list[TokenLike] = []  # done, not at the end: filtered or cut off there
        self.reached_end = 0
        listed = list(tokens)
        # A token at a join is the fork's own token (the combine) when branches of it stand
        # there too, or when it is not a branch at all; else it is a branch that arrived.
        children_at = {(t.parent_token_id, t.node_id) for t in listed if t.parent_token_id}
        for t in listed:
            node = graph.nodes.get(t.node_id)
            if node is None:
                continue  # a node of another version: nothing to draw it on
            state = str(t.state)
            if isinstance(node, Join):
                forker = not t.parent_token_id or (t.token_id, t.node_id) in children_at
                if not forker or state == "JOINED":
                    self.arrived[node.id] += 1
                    if state == "JOINED":
                        self.live.setdefault(node.id, Counter())["JOINED"] += 1
                    continue
                self.combining[node.fork] += 1
            if state != "DONE":
                self.live.setdefault(node.id, Counter())[_shown(state)] += 1
            elif node.kind == "end":
                self.reached_end += 1
            else:
                self.ended.append(t)

    def count_live(self, node_id: str) -> int:
        return sum(self.live.get(node_id, Counter()).values())


def node_states(
    graph: Graph,
    status: str,
    reason: str,
    tokens: Iterable[TokenLike],
    events: Iterable[EventLike],
) -> dict[str, dict[str, int]]:
    """Node id -> state -> count for the instance (see the module docstring); nodes the
    instance never reached are absent. `events` must be the whole log."""
    status = str(status)
    log = _Log(events)
    toks = _Tokens(graph, tokens)
    done: Counter[str] = Counter({n.id: _passes(n, log) for n in graph})
    for node in graph:
        if isinstance(node, Fork | ForEach):
            done[node.id] += log.completed[node.join] + toks.combining[node.id]
        elif node.kind == "end":
            done[node.id] += toks.reached_end

    # Done tokens standing elsewhere: first those a filter ended (the branch_filtered events
    # name the node their token stood on; a filtered instance completes with reason
    # "filtered"), the rest were cut off there by the end of the instance.
    budget = Counter(log.filtered)
    cut: Counter[str] = Counter()
    for t in toks.ended:
        if budget[t.node_id] > 0:
            budget[t.node_id] -= 1
        elif not t.parent_token_id and status == "COMPLETED" and reason == "filtered":
            pass
        else:
            cut[t.node_id] += 1

    _infer_sleeps(graph, done, toks, cut)

    out: dict[str, dict[str, int]] = {}

    def add(node_id: str, state: str, n: int) -> None:
        if n > 0:
            per = out.setdefault(node_id, {})
            per[state] = per.get(state, 0) + n

    for node_id, states in toks.live.items():
        for state, n in states.items():
            add(node_id, state, n)
    for node_id, n in done.items():
        add(node_id, "DONE", n)
    if status == "FAILED":
        where = _where_failed(graph, reason, log, cut)
        if where:
            add(where, "FAILED", 1)
            cut[where] = max(0, cut[where] - 1)
    if status != "RUNNING":
        for node_id, n in cut.items():
            add(node_id, "CANCELLED", n)
    return out


def _where_failed(graph: Graph, reason: str, log: _Log, cut: Counter[str]) -> str:
    """The node the reason names; else the last failed step; else the one node cut off."""
    for candidate in (failed_node(reason), log.last_failed_step):
        if candidate in graph.nodes:
            return candidate
    standing = [node_id for node_id, n in cut.items() if n > 0]
    return standing[0] if len(standing) == 1 else ""


def _predecessors(graph: Graph) -> dict[str, set[str]]:
    into: dict[str, set[str]] = {}
    for node in graph:
        targets: list[str | None]
        if isinstance(node, Fork):
            targets = list(node.branches.values())
        elif isinstance(node, ForEach):
            targets = [node.body]
        else:
            targets = [getattr(node, "next", None)]
            if isinstance(node, Predicate | Condition):
                targets.append(node.alt)
            if isinstance(node, Await):
                targets.append(node.on_timeout)
        for target in {t for t in targets if t}:
            into.setdefault(target, set()).add(node.id)
    return into


def _infer_sleeps(graph: Graph, done: Counter[str], toks: _Tokens, cut: Counter[str]) -> None:
    """A sleep that had nothing to wait for leaves no event: every token that reached the node
    after it (when only the sleep leads there) went past it."""
    into = _predecessors(graph)
    sleeps = [n for n in graph if isinstance(n, Sleep)]
    for _ in range(len(sleeps)):  # a chain of sleeps settles from its far end
        changed = False
        for sleep in sleeps:
            if into.get(sleep.next) != {sleep.id}:
                continue
            after = graph.nodes[sleep.next]
            if isinstance(after, Join):
                reached = toks.arrived[after.id]
            else:
                reached = done[after.id] + toks.count_live(after.id) + cut[after.id]
            if reached > done[sleep.id]:
                done[sleep.id] = reached
                changed = True
        if not changed:
            return
