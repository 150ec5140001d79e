"""Where each live token of an instance goes on a new version, or why it cannot. Pure.

`plan_instance` takes an instance's live tokens (their node, state and place in the token tree)
and the two graphs, and answers either one move per token or the blockers that stop the
instance from moving, each with its rule name and a message a person can act on. The rules
(docs/migration.md states each one; spec/conformance/migration/ holds their vectors):

    removed-node        a token at a node the new version lacks, and no --map for it
    kind-changed        a token at a node whose id names another kind of node now
    moved-node          a token at a node that moved into or out of a parallel / for_each block
    block-removed       a token inside a block the new version lacks (or that is not a block)
    block-changed       a token inside a block whose structure changed: its branches, the
                        nodes and edges of its branches or body, its join
    signal-renamed      a token at an await whose signal name changed while a signal of the
                        old name is buffered for the instance
    subflow-changed     a token waiting on a child at a subflow step that now starts another
                        flow (the child would finish into a step that does not expect it)

Timers: a sleep's wake-up and an await's deadline keep their absolute time ("keep"), unless
timers are restarted ("restart": from the moment the migration applies, with the new
duration); an await that lost its timeout drops its deadline, one that gained a timeout starts
it when the migration applies. A retry backoff always keeps its time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wiggle.graph import Await, ForEach, Fork, Graph, Join, Sleep, Subflow

from ._diff import edges_of

__all__ = [
    "RULES",
    "Blocker",
    "InstancePlan",
    "MapError",
    "TokenMove",
    "TokenPos",
    "check_mapping",
    "plan_instance",
]

#: Every blocker rule, in the order they are checked.
RULES = (
    "removed-node",
    "kind-changed",
    "moved-node",
    "block-removed",
    "block-changed",
    "signal-renamed",
    "subflow-changed",
)


class MapError(ValueError):
    """A --map that cannot be: its source or target does not exist, or the kinds differ."""


@dataclass(frozen=True)
class TokenPos:
    """A live token as the planner sees it."""

    token_id: str
    node_id: str
    state: str  # READY | LEASED | WAITING | AWAITING | JOINED
    parent_token_id: str | None = None
    wait_kind: str | None = None  # WAITING: sleep | retry | child | held
    child_instance_id: str | None = None

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> TokenPos:
        return TokenPos(
            doc["token_id"],
            doc["node"],
            doc["state"],
            doc.get("parent"),
            doc.get("wait_kind"),
            doc.get("child"),
        )


@dataclass(frozen=True)
class TokenMove:
    token_id: str
    node: str  # where it is
    to: str  # where it goes
    timer: str = ""  # "" (none) | keep | restart | drop | start

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"token_id": self.token_id, "node": self.node, "to": self.to}
        if self.timer:
            out["timer"] = self.timer
        return out


@dataclass(frozen=True)
class Blocker:
    rule: str
    node: str
    message: str
    token_id: str = ""

    def as_json(self) -> dict[str, Any]:
        out = {"rule": self.rule, "node": self.node, "message": self.message}
        if self.token_id:
            out["token_id"] = self.token_id
        return out


@dataclass
class InstancePlan:
    moves: list[TokenMove] = field(default_factory=list)
    blockers: list[Blocker] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        return "blocked" if self.blockers else "migrate"


def check_mapping(old: Graph, new: Graph, mapping: Mapping[str, str]) -> None:
    """MapError for a --map whose nodes do not exist or are of different kinds."""
    for source, target in mapping.items():
        if source not in old.nodes:
            raise MapError(
                f"--map {source}={target}: version {old.version[:19]} of {old.name!r} has no "
                f"node {source!r}"
            )
        if target not in new.nodes:
            raise MapError(
                f"--map {source}={target}: version {new.version[:19]} of {new.name!r} has no "
                f"node {target!r}"
            )
        a, b = old.nodes[source].kind, new.nodes[target].kind
        if a != b:
            raise MapError(
                f"--map {source}={target}: {source!r} is a {a} and {target!r} a {b}; a token "
                "can only move to a node of the same kind"
            )


def _target(old: Graph, new: Graph, node_id: str, mapping: Mapping[str, str]) -> str | None:
    if node_id in mapping:
        return mapping[node_id]
    if node_id in new.nodes:
        return node_id
    return None


def _structure(graph: Graph, block: str, rename: Mapping[str, str]) -> Any:
    """A block's shape: its own edges, its join, and every node inside it with its kind and
    edges (ids renamed through `rename`, so a mapped rename is not a change)."""

    def r(node_id: str) -> str:
        return rename.get(node_id, node_id)

    node = graph.nodes[block]
    inside = [n for n, blocks in graph.scopes.items() if block in blocks]
    shape = []
    for n in [block, *inside]:
        inner = graph.nodes[n]
        shape.append((r(n), inner.kind, sorted((r(a), r(b), lab) for a, b, lab in edges_of(inner))))
    join_id = node.join if isinstance(node, Fork | ForEach) else ""
    join = graph.nodes.get(join_id)
    return sorted(shape), (join.kind if join is not None else "", r(join_id))


def plan_instance(
    old: Graph,
    new: Graph,
    tokens: Sequence[TokenPos],
    *,
    mapping: Mapping[str, str] | None = None,
    buffered_signals: Sequence[str] = (),
    timers: str = "keep",
) -> InstancePlan:
    """Where each token goes, or the blockers (see the module docstring)."""
    mapping = dict(mapping or {})
    plan = InstancePlan()
    by_id = {t.token_id: t for t in tokens}
    # Identity for the nodes both graphs share with the same kind; --map for the rest.
    rename = {k: v for k, v in mapping.items()}
    checked_blocks: dict[str, Blocker | None] = {}
    for tok in tokens:
        blocker = _token_blocker(
            old, new, tok, mapping, rename, buffered_signals, by_id, checked_blocks
        )
        if blocker is not None:
            plan.blockers.append(blocker)
            continue
        to = _target(old, new, tok.node_id, mapping)
        assert to is not None
        plan.moves.append(
            TokenMove(tok.token_id, tok.node_id, to, _timer(old, new, tok, to, timers))
        )
    return plan


def _blocks_of(old: Graph, tok: TokenPos, by_id: Mapping[str, TokenPos]) -> list[str]:
    """The blocks a token is inside: those enclosing its node, and for a branch waiting at its
    join (or a fork parent waiting for its branches) the block it belongs to."""
    node = old.nodes[tok.node_id]
    blocks = list(old.scopes.get(tok.node_id, ()))
    if tok.state == "JOINED" and isinstance(node, Fork | ForEach):
        blocks.append(node.id)  # a fork parent: its branches are in flight
    if isinstance(node, Join) and tok.parent_token_id is not None:
        blocks.append(node.fork)  # a branch arrived at the join, waiting for the others
    return blocks


def _token_blocker(
    old: Graph,
    new: Graph,
    tok: TokenPos,
    mapping: Mapping[str, str],
    rename: Mapping[str, str],
    buffered: Sequence[str],
    by_id: Mapping[str, TokenPos],
    checked_blocks: dict[str, Blocker | None],
) -> Blocker | None:
    node = old.nodes[tok.node_id]
    to = _target(old, new, tok.node_id, mapping)
    where = f"token {tok.token_id[:12]} ({tok.state}) at {tok.node_id!r}"
    if to is None:
        if isinstance(node, Subflow) and tok.child_instance_id:
            message = (
                f"{where} waits on child {tok.child_instance_id} at a subflow step the new "
                f"version lacks; map it to a subflow step (--map {tok.node_id}=NEW)"
            )
        else:
            message = (
                f"{where}: the new version has no node {tok.node_id!r}; map it to one "
                f"(--map {tok.node_id}=NEW)"
            )
        return Blocker("removed-node", tok.node_id, message, tok.token_id)
    target = new.nodes[to]
    if target.kind != node.kind:
        return Blocker(
            "kind-changed",
            tok.node_id,
            f"{where}: {to!r} is a {target.kind} in the new version, not a {node.kind}; "
            f"map it to a {node.kind} (--map {tok.node_id}=NEW)",
            tok.token_id,
        )
    before = tuple(rename.get(b, b) for b in old.scopes.get(tok.node_id, ()))
    after = new.scopes.get(to, ())
    if before != after:
        shown_before = " > ".join(before) or "the top level"
        shown_after = " > ".join(after) or "the top level"
        return Blocker(
            "moved-node",
            tok.node_id,
            f"{where}: the node moved from {shown_before} to {shown_after}; a token cannot "
            "change blocks while it runs (let it leave the block, or reset it)",
            tok.token_id,
        )
    for block in _blocks_of(old, tok, by_id):
        if block not in checked_blocks:
            checked_blocks[block] = _block_blocker(old, new, block, rename)
        found = checked_blocks[block]
        if found is not None:
            return Blocker(found.rule, found.node, f"{where}: {found.message}", tok.token_id)
    if isinstance(node, Await) and tok.state == "AWAITING":
        assert isinstance(target, Await)
        if target.signal != node.signal and node.signal in buffered:
            return Blocker(
                "signal-renamed",
                tok.node_id,
                f"{where}: the await now takes signal {target.signal!r}, not {node.signal!r}, "
                f"and a {node.signal!r} signal is buffered for the instance; let the await "
                "take it first (or migrate after sending the new one)",
                tok.token_id,
            )
    if isinstance(node, Subflow) and tok.child_instance_id:
        assert isinstance(target, Subflow)
        if target.flow != node.flow:
            return Blocker(
                "subflow-changed",
                tok.node_id,
                f"{where} waits on a child of flow {node.flow!r}; the step now starts flow "
                f"{target.flow!r}; let the child finish first",
                tok.token_id,
            )
    return None


def _block_blocker(old: Graph, new: Graph, block: str, rename: Mapping[str, str]) -> Blocker | None:
    """Whether a block in flight cannot move to the new version."""
    target = rename.get(block, block)
    node = old.nodes[block]
    kind = "parallel" if isinstance(node, Fork) else "for_each"
    now = new.nodes.get(target)
    if now is None or now.kind != node.kind:
        return Blocker(
            "block-removed",
            block,
            f"it is inside {kind} block {block!r}, which the new version lacks; let the block "
            "finish first",
        )
    if _structure(old, block, rename) != _structure(new, target, {}):
        return Blocker(
            "block-changed",
            block,
            f"it is inside {kind} block {block!r}, whose branches changed in the new version "
            "while some are in flight; let the block finish first",
        )
    return None


def _timer(old: Graph, new: Graph, tok: TokenPos, to: str, timers: str) -> str:
    node, target = old.nodes[tok.node_id], new.nodes[to]
    if tok.state == "WAITING" and tok.wait_kind == "sleep":
        assert isinstance(node, Sleep) and isinstance(target, Sleep)
        return "restart" if timers == "restart" else "keep"
    if tok.state == "AWAITING":
        assert isinstance(node, Await) and isinstance(target, Await)
        if target.timeout_ms is None:
            return "drop" if node.timeout_ms is not None else ""
        if node.timeout_ms is None:
            return "start"
        return "restart" if timers == "restart" else "keep"
    if tok.state == "WAITING" and tok.wait_kind == "retry":
        return "keep"
    return ""
