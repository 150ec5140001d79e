"""Did the run do what it claims? Checked from the engine's own tables, never from the client.

Every instance the loop started must be COMPLETED with the expected final context, and carry
exactly one `step_completed` event for each step node of the flow (a step applied twice, or
skipped, shows here even when the context looks right). `problems` is the pure check over rows;
`verify` reads the rows of the run's instances only, so a database holding other instances
(an earlier run, a filled history) verifies the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from wiggle.engine.reads.overview import Ending, run_endings
from wiggle.engine.store.db import Database

__all__ = ["InstanceRow", "problems", "verify"]

#: Examples quoted per kind of problem; the counts say how many there are in all.
EXAMPLES = 3

InstanceRow = Ending  # id, status, context (JSON text), reason


def problems(
    expected_ids: Sequence[str],
    rows: Iterable[InstanceRow],
    step_events: Mapping[tuple[str, str], int],
    expected_context: Any,
    step_nodes: Sequence[str],
) -> list[str]:
    """What is wrong with the run, one line per kind of defect ([] when it verified).

    `step_events` maps (instance id, node id) to its number of step_completed events.
    """
    found = {row[0]: row for row in rows}
    missing = [i for i in expected_ids if i not in found]
    unfinished: Counter[str] = Counter()
    unfinished_examples: list[str] = []
    wrong_context: list[str] = []
    for instance_id in expected_ids:
        row = found.get(instance_id)
        if row is None:
            continue
        _, status, context, reason = row
        if status != "COMPLETED":
            unfinished[status] += 1
            if len(unfinished_examples) < EXAMPLES:
                note = f": {reason[:120]}" if reason else ""
                unfinished_examples.append(f"{instance_id} {status}{note}")
        elif orjson.loads(context) != expected_context:
            wrong_context.append(instance_id)
    per_instance: Counter[str] = Counter()
    for (instance_id, _node), n in step_events.items():
        per_instance[instance_id] += n
    bad_steps: list[str] = []
    for instance_id in expected_ids:
        if instance_id not in found:
            continue
        counts = [step_events.get((instance_id, node), 0) for node in step_nodes]
        # Events on nodes that are not step nodes of the flow count against it too.
        if any(n != 1 for n in counts) or per_instance[instance_id] != len(step_nodes):
            bad_steps.append(instance_id)
    out = []
    total = len(expected_ids)
    if missing:
        out.append(
            f"{len(missing)} of {total} instances are not in the database, e.g. "
            + ", ".join(missing[:EXAMPLES])
        )
    if unfinished:
        kinds = ", ".join(f"{status} {n}" for status, n in sorted(unfinished.items()))
        out.append(
            f"{sum(unfinished.values())} of {total} instances did not complete ({kinds}), e.g. "
            + "; ".join(unfinished_examples)
        )
    if wrong_context:
        out.append(
            f"{len(wrong_context)} of {total} completed instances do not end with "
            f"{orjson.dumps(expected_context).decode()}, e.g. "
            + ", ".join(wrong_context[:EXAMPLES])
        )
    if bad_steps:
        out.append(
            f"{len(bad_steps)} of {total} instances lack exactly one step_completed event per "
            f"step node ({len(step_nodes)} nodes), e.g. " + ", ".join(bad_steps[:EXAMPLES])
        )
    return out


def verify(
    url: str, instance_ids: Sequence[str], expected_context: Any, step_nodes: Sequence[str]
) -> list[str]:
    """Read the run's instances and their step events (engine: run_endings), then `problems`."""
    db = Database(url)
    try:
        rows, step_events = db.read(lambda conn: run_endings(conn, instance_ids))
    finally:
        db.dispose()
    return problems(instance_ids, rows, step_events, expected_context, step_nodes)
