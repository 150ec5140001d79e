"""A migration plan: a content-hashed JSON document saying, per live instance, where each token
goes on the new version or why the instance is blocked. Pure: the engine reads the instances
(`InstanceSnapshot`), this module decides and writes the document, and checks one handed back.

The document (docs/migration.md, "The plan"):

    {"format": 1, "kind": "wiggle-migration-plan", "flow": F, "to": V2, "from": [V1, ...],
     "map": {...}, "timers": "keep"|"restart", "children": bool,
     "instances": [{"instance_id", "flow", "from", "to", "fingerprint", "outcome",
                    "moves": [...], "blockers": [...], "children": [...],
                    "children_left": [...]}],
     "summary": {...}, "hash": "sha256:..."}

`hash` is the SHA-256 of the RFC 8785 form of everything else: a plan edited by hand no longer
matches it. `fingerprint` is the instance's position when planned (version, and each live
token's id, node and state): applying refuses an instance that moved since.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wiggle.compiler import canonical_json
from wiggle.graph import Graph

from ._rules import TokenPos, check_mapping, plan_instance

__all__ = [
    "PLAN_FORMAT",
    "InstanceSnapshot",
    "PlanError",
    "fingerprint",
    "make_plan",
    "plan_hash",
    "plan_text",
    "verify_plan",
]

PLAN_FORMAT = 1
PLAN_KIND = "wiggle-migration-plan"
#: How many instances of each outcome the text summary shows.
EXAMPLES = 5


class PlanError(ValueError):
    """A plan document that is not one, or was changed after it was made."""


@dataclass(frozen=True)
class InstanceSnapshot:
    """A live instance as planned: its version, live tokens, the signals buffered for it and
    its running subflow children."""

    instance_id: str
    flow: str
    version: str
    tokens: tuple[TokenPos, ...]
    buffered_signals: tuple[str, ...] = ()
    children: tuple[InstanceSnapshot, ...] = field(default_factory=tuple)


def fingerprint(version: str, tokens: Sequence[TokenPos]) -> str:
    """The instance's position: changes whenever a token moves, appears or ends."""
    rows = sorted([t.token_id, t.node_id, t.state, t.wait_kind or ""] for t in tokens)
    return hashlib.sha256(canonical_json([version, rows])).hexdigest()[:32]


def plan_hash(doc: Mapping[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != "hash"}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def _entry(
    snap: InstanceSnapshot,
    old: Graph,
    new: Graph,
    *,
    mapping: Mapping[str, str],
    timers: str,
    children: bool,
    graph_of: Callable[[str], Graph],
    newest_of: Callable[[str], Graph | None],
) -> dict[str, Any]:
    planned = plan_instance(
        old,
        new,
        snap.tokens,
        mapping=mapping,
        buffered_signals=snap.buffered_signals,
        timers=timers,
    )
    entry: dict[str, Any] = {
        "instance_id": snap.instance_id,
        "flow": snap.flow,
        "from": snap.version,
        "to": new.version,
        "fingerprint": fingerprint(snap.version, snap.tokens),
        "outcome": planned.outcome,
        "moves": [m.as_json() for m in planned.moves],
        "blockers": [b.as_json() for b in planned.blockers],
    }
    kids: list[dict[str, Any]] = []
    left: list[dict[str, Any]] = []
    for child in snap.children:
        target = newest_of(child.flow) if children else None
        if target is None or target.version == child.version:
            why = "--children not given" if not children else "already on its newest version"
            left.append(
                {
                    "instance_id": child.instance_id,
                    "flow": child.flow,
                    "version": child.version,
                    "why": why,
                }
            )
            continue
        kids.append(
            _entry(
                child,
                graph_of(child.version),
                target,
                mapping={},
                timers=timers,
                children=children,
                graph_of=graph_of,
                newest_of=newest_of,
            )
        )
    if kids:
        entry["children"] = kids
    if left:
        entry["children_left"] = left
    return entry


def make_plan(
    flow: str,
    new: Graph,
    snapshots: Sequence[InstanceSnapshot],
    *,
    graph_of: Callable[[str], Graph],
    newest_of: Callable[[str], Graph | None],
    mapping: Mapping[str, str] | None = None,
    timers: str = "keep",
    children: bool = False,
    created_at: str = "",
    where: Sequence[str] = (),
) -> dict[str, Any]:
    """The plan for moving `snapshots` (live instances of `flow`) to version `new`.

    MapError (from check_mapping) when a --map names a node that does not exist or of another
    kind in any version being planned from."""
    if timers not in ("keep", "restart"):
        raise PlanError(f"--timers is keep or restart, not {timers!r}")
    mapping = dict(mapping or {})
    versions = sorted({s.version for s in snapshots if s.version != new.version})
    for version in versions:
        check_mapping(graph_of(version), new, mapping)
    entries = [
        _entry(
            snap,
            graph_of(snap.version),
            new,
            mapping=mapping,
            timers=timers,
            children=children,
            graph_of=graph_of,
            newest_of=newest_of,
        )
        for snap in snapshots
        if snap.version != new.version
    ]
    doc: dict[str, Any] = {
        "format": PLAN_FORMAT,
        "kind": PLAN_KIND,
        "flow": flow,
        "to": new.version,
        "from": versions,
        "map": mapping,
        "timers": timers,
        "children": children,
        "where": list(where),
        "created_at": created_at,
        "instances": entries,
        "summary": _summary(entries, already=len(snapshots) - len(entries)),
    }
    doc["hash"] = plan_hash(doc)
    return doc


def _walk(entries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for e in entries:
        out.append(e)
        out.extend(_walk(e.get("children", [])))
    return out


def _summary(entries: Sequence[Mapping[str, Any]], *, already: int) -> dict[str, Any]:
    by_rule: dict[str, int] = {}
    for e in _walk(entries):
        for rule in sorted({b["rule"] for b in e["blockers"]}):
            by_rule[rule] = by_rule.get(rule, 0) + 1
    return {
        "instances": len(entries),
        "migrate": sum(1 for e in entries if e["outcome"] == "migrate"),
        "blocked": sum(1 for e in entries if e["outcome"] == "blocked"),
        "blocked_by_rule": by_rule,
        "children_planned": sum(len(e.get("children", [])) for e in _walk(entries)),
        "children_left": sum(len(e.get("children_left", [])) for e in _walk(entries)),
        "already_on_target": already,
    }


def verify_plan(doc: Any) -> dict[str, Any]:
    """The plan, checked: its shape and its hash. PlanError says what is wrong."""
    if not isinstance(doc, dict) or doc.get("kind") != PLAN_KIND:
        raise PlanError("this is not a Wiggle migration plan (make one with wiggle migrate plan)")
    if doc.get("format") != PLAN_FORMAT:
        raise PlanError(f"plan format {doc.get('format')!r} is not {PLAN_FORMAT}; make it again")
    for key, kind in (("flow", str), ("to", str), ("instances", list), ("hash", str)):
        if not isinstance(doc.get(key), kind):
            raise PlanError(f"the plan has no valid {key!r}; make it again")
    if plan_hash(doc) != doc["hash"]:
        raise PlanError(
            "the plan's content does not match its hash (was it edited by hand?); make a new "
            "plan with wiggle migrate plan"
        )
    return doc


def plan_text(doc: Mapping[str, Any]) -> str:
    """For people: what the plan would do, counts per outcome and examples of each."""
    s = doc["summary"]
    lines = [
        f"plan {doc['hash'][:19]} for {doc['flow']}: {s['instances']} live instance(s) "
        f"from {', '.join(v[:19] for v in doc['from']) or '-'} to {doc['to'][:19]}",
        f"  migrate  {s['migrate']}",
        f"  blocked  {s['blocked']}"
        + (
            "  (" + ", ".join(f"{r} {n}" for r, n in sorted(s["blocked_by_rule"].items())) + ")"
            if s["blocked_by_rule"]
            else ""
        ),
    ]
    if s["children_planned"] or s["children_left"]:
        lines.append(
            f"  children planned {s['children_planned']}, left on their version "
            f"{s['children_left']}"
        )
    if s["already_on_target"]:
        lines.append(f"  already on the target version: {s['already_on_target']}")
    if doc["map"]:
        lines.append("  map: " + ", ".join(f"{a}={b}" for a, b in sorted(doc["map"].items())))
    lines.append(f"  timers: {doc['timers']}")
    for outcome in ("migrate", "blocked"):
        shown = [e for e in doc["instances"] if e["outcome"] == outcome][:EXAMPLES]
        if not shown:
            continue
        lines.append(f"{outcome}, for example:")
        for e in shown:
            if outcome == "migrate":
                moves = ", ".join(
                    m["node"] if m["node"] == m["to"] else f"{m['node']} -> {m['to']}"
                    for m in e["moves"]
                )
                lines.append(f"  {e['instance_id']}: {moves or 'no live token'}")
            else:
                for b in e["blockers"][:2]:
                    lines.append(f"  {e['instance_id']}: [{b['rule']}] {b['message']}")
    return "\n".join(lines)
