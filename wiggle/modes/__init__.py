"""The three execution modes side by side: a flow as each mode runs it, and whether they agree.

    MODES                    SERVER, LOCAL_SYNC, LOCAL_ASYNC
    compiled_in_mode(f, m)   the variant of flow `f` with `execution: m` (its own version)
    flow_queues(flows)       the queues a worker must serve to run `flows`
    Ending                   how one run of an instance ended under one mode
    differences(e, rule)     how each ending parted from the first, under a `Rule`
                             (EXACT, LIVE, CORPUS: what may differ, by how the runs were run)

The conformance corpus (`wiggle conformance`), the one-flow check (`wiggle conformance --flow`)
and the scenario runner (`wiggle test`) all judge mode agreement here.
"""

from __future__ import annotations

from wiggle.modes._agreement import CORPUS, EXACT, LIVE, Difference, Ending, Rule, differences
from wiggle.modes._variants import MODES, compiled_in_mode, flow_queues

__all__ = [
    "CORPUS",
    "EXACT",
    "LIVE",
    "MODES",
    "Difference",
    "Ending",
    "Rule",
    "compiled_in_mode",
    "differences",
    "flow_queues",
]
