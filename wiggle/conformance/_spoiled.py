"""Whether the machine, rather than the worker, spoiled a run: the verdict must not hang on time.

A case can only say what must happen if its faults land where it aims them and if the leases it
does not disturb hold. On a loaded machine neither is certain: the runner may see a step start
only after it has ended, and a starved worker may miss the heartbeats of a lease it keeps
perfectly well. So the runner judges, from the record (the trace, the tasks handed out, the
reports, the instance's events) rather than from a clock, whether a failed run tested what it
meant to, and runs it again if not (`_runner`). Two things spoil a run:

- a kill, a pause or a cancel aimed at a `hold` step (the slow step that the crash cases use to
  have a step in flight) that landed after that step had ended: its result was reported before
  the fault, or the run had moved on to the step after it; a term (SIGTERM, a drain) only when
  the run had moved on, since a drain lets the step finish and report. A cancel lands when the
  server begins serving the attempt that took effect, which on a loaded machine (or after an
  UNAVAILABLE attempt the client sent again) can be seconds after the runner sent it: a report
  of the step answered before then means the moment had passed before the cancel reached the
  server. One that reached the server in time is judged, whatever the engine then did with it;
- a lease that expired where no fault explains it: no fault, an expiry before the first kill or
  pause began (a worker starved before the fault, as a loaded machine did to the TypeScript
  worker's first step of crash/kill-in-branch), or more expiries than the leases a kill took
  down or a pause held (handed out before the worker was let go on: a frozen worker's open poll
  may take a lease with it); a lease handed out after a thaw and left to expire is the machine
  starving the worker.

A worker that breaks either by itself (reports a hold before it has held, lets every lease lapse)
spoils every try and fails: the runner tries a few times, then reports the run as not judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wiggle.conformance._cases import Moment
from wiggle.conformance._recorder import Call, Delivery
from wiggle.conformance._trace import TraceLine
from wiggle.graph import Graph, Task

__all__ = ["Landed", "late_landings", "spoiled", "unexplained_lapses"]

#: The faults that stop a worker holding leases, which may then expire.
_STOPS = ("kill", "pause")


@dataclass(frozen=True)
class Landed:
    """A fault or cancel as it landed."""

    action: str  # "kill", "pause", "term" or "cancel"
    when: Moment  # the moment it was aimed at
    at: float  # time.monotonic(), the recorder's clock: a kill's process is dead by then
    lines: int  # how many trace lines had been written by then
    thawed: float | None = None  # a pause: when the worker was let go on
    #: A cancel: when the server began serving the attempt that took effect (None: not seen).
    arrived: float | None = None
    #: A kill, term or pause: when it was begun (a term's signal sent; `at` is when the drained
    #: process had exited). A lease that expired before a kill or pause began is not its doing.
    began: float | None = None


def _final(call: Call) -> bool:
    """An applied report that ended its lease."""
    if call.rpc == "AdvanceRun":
        return call.ok and call.final
    return call.ok and call.rpc in ("CompleteTask", "FailTask", "ReleaseTask")


def _carries(call: Call, delivery: Delivery, node: str) -> bool:
    """Whether an applied report of `delivery` reports a result of `node`."""
    if not call.ok:
        return False
    if call.rpc == "CompleteTask":
        return delivery.node_id == node
    return call.rpc == "AdvanceRun" and any(s.node_id == node for s in call.steps)


def _reported_before(
    at: float,
    root: str,
    node: str,
    deliveries: Sequence[Delivery],
    calls: Sequence[Call],
    *,
    answered: bool,
) -> bool:
    """Whether a report carrying `node`'s result, of a task handed out before `at`, was applied;
    `answered`: only one answered before `at` counts (answered means applied: the answer follows
    the commit)."""
    before = {d.lease: d for d in deliveries if d.instance_id == root and d.at < at}
    return any(
        _carries(c, before[c.lease], node)
        for c in calls
        if c.lease in before and (not answered or c.at < at)
    )


def late_landings(
    landed: Sequence[Landed],
    graph: Graph,
    root: str,
    lines: Sequence[TraceLine],
    deliveries: Sequence[Delivery],
    calls: Sequence[Call],
) -> list[str]:
    """The faults and cancels aimed at a hold step of the flow under test that landed after the
    step had ended. `lines` are the run's trace lines, `deliveries` and `calls` the recorder's."""
    found = []
    for fault in landed:
        node = graph.nodes.get(fault.when.key) if fault.when.kind == "started" else None
        if not isinstance(node, Task) or node.activity != "hold":
            continue
        moved_on = any(
            line.seq < fault.lines and line.instance_id == root and line.node_id == node.next
            for line in lines
        )
        if fault.action == "term":
            # A drain lets the step in flight finish and report: a term is late when the next
            # step had started, or when the step had been reported before the signal was sent
            # (a term sent in time, that the worker let the next step start after, is the
            # worker's failure to drain).
            sent = fault.began if fault.began is not None else fault.at
            if moved_on:
                found.append(
                    f"the term at {fault.when} landed after {node.id} ended ({node.next} had"
                    " started)"
                )
            elif _reported_before(sent, root, node.id, deliveries, calls, answered=True):
                found.append(
                    f"the term at {fault.when} was sent after {node.id} ended ({node.id} had"
                    " been reported)"
                )
            continue
        # A kill or pause stops the worker at `at`: whatever it reported was sent before. A
        # cancel refuses what the server applies after it, so only a report answered before the
        # cancel reached the server counts (answered means applied: the answer follows the
        # commit).
        at = fault.at
        if fault.action == "cancel" and fault.arrived is not None:
            at = max(at, fault.arrived)
        reported = _reported_before(
            at, root, node.id, deliveries, calls, answered=fault.action == "cancel"
        )
        if moved_on or reported:
            how = f"{node.next} had started" if moved_on else f"{node.id} had been reported"
            found.append(f"the {fault.action} at {fault.when} landed after {node.id} ended ({how})")
    return found


def unexplained_lapses(
    landed: Sequence[Landed],
    lapses: Sequence[float],
    deliveries: Sequence[Delivery],
    calls: Sequence[Call],
) -> str | None:
    """The run's leases expired at `lapses` (its lease_expired events, on the recorder's clock):
    more than its faults explain? An expiry before the first kill or pause began is nobody's
    doing but the machine's; the later ones are explained up to the leases not yet ended by a
    final report that were handed out before a kill, or before a pause's thaw. (An expiry is
    logged when the server notices it, possibly after the fact: one logged after a fault began
    counts as the fault's.) A pause with no thaw time recorded is not judged."""
    if not lapses or any(f.action == "pause" and f.thawed is None for f in landed):
        return None
    stops = [f.began if f.began is not None else f.at for f in landed if f.action in _STOPS]
    first = min(stops, default=None)
    early = sum(1 for t in lapses if first is None or t < first)
    ended = {c.lease for c in calls if _final(c)}
    # A kill takes down the leases its worker held; a pause, those handed out before the
    # worker was let go on (a frozen worker's open poll may take a lease with it).
    allowed = len(
        {
            d.lease
            for fault in landed
            if fault.action in _STOPS
            for d in deliveries
            if d.lease not in ended
            and d.at < (fault.thawed if fault.thawed is not None else fault.at)
        }
    )
    unexplained = early + max(0, len(lapses) - early - allowed)
    if unexplained == 0:
        return None
    return f"{unexplained} lease(s) expired that no fault explains"


def spoiled(
    landed: Sequence[Landed],
    graph: Graph,
    root: str,
    lines: Sequence[TraceLine],
    deliveries: Sequence[Delivery],
    calls: Sequence[Call],
    lapses: Sequence[float],
) -> str | None:
    """Why the machine spoiled the run, or None. `lapses`: when its leases expired."""
    reasons = late_landings(landed, graph, root, lines, deliveries, calls)
    lapsed = unexplained_lapses(landed, lapses, deliveries, calls)
    reasons += [lapsed] if lapsed else []
    return "; ".join(reasons) or None
