"""Moving live instances to a new version of their flow, planned from the diff of the two
graphs (docs/migration.md). Pure: the engine reads instances and applies the plan's moves.

    diff_graphs(old, new) -> GraphDiff        every node classified, every edge added/removed
    plan_instance(old, new, tokens, ...)      where each token goes, or the blockers
    make_plan(flow, new, snapshots, ...)      the content-hashed plan document
    verify_plan(doc)                          a plan handed back, checked
"""

from __future__ import annotations

from wiggle.migration._diff import Edge, GraphDiff, NodeChange, diff_graphs, edges_of
from wiggle.migration._plan import (
    PLAN_FORMAT,
    InstanceSnapshot,
    PlanError,
    fingerprint,
    make_plan,
    plan_hash,
    plan_text,
    verify_plan,
)
from wiggle.migration._rules import (
    RULES,
    Blocker,
    InstancePlan,
    MapError,
    TokenMove,
    TokenPos,
    check_mapping,
    plan_instance,
)

__all__ = [
    "PLAN_FORMAT",
    "RULES",
    "Blocker",
    "Edge",
    "GraphDiff",
    "InstancePlan",
    "InstanceSnapshot",
    "MapError",
    "NodeChange",
    "PlanError",
    "TokenMove",
    "TokenPos",
    "check_mapping",
    "diff_graphs",
    "edges_of",
    "fingerprint",
    "make_plan",
    "plan_hash",
    "plan_instance",
    "plan_text",
    "verify_plan",
]
