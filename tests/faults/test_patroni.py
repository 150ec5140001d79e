"""Wiggle on a real Patroni + etcd cluster (hacluster.py), failed over under load (ha_load.py).

Three etcd members, three PostgreSQL 15 nodes under Patroni with `synchronous_mode` on, and
Wiggle's two servers and two workers on the multi-host URL or behind HAProxy. Nobody touches a
server or a worker: each scenario breaks the cluster and proves that every start answered and
every step acknowledged is still there afterwards, nothing ran twice that the protocol does not
allow, and every instance ends; its ledger line says when steps committed again.

The short suite (scripts/test.sh) runs one cluster through a planned switchover and then a kill
-9 of the new primary's PostgreSQL, on the multi-host URL; the full suite (scripts/faults.sh)
runs each fault on its own cluster, in both layouts:

- the primary's PostgreSQL killed -9 (Patroni fails over at once: `primary_start_timeout: 0`);
- the primary's whole node killed -9, Patroni too: the leader key has to lapse in etcd (`ttl`);
- `patronictl switchover` to the synchronous standby;
- the primary cut off from etcd and from its replicas while Wiggle still reaches it: its
  Patroni demotes it after `retry_timeout`, and a replica takes the lapsed key; commits sent to
  it meanwhile wait for a synchronous standby that is gone, and none is acknowledged;
- the etcd leader killed -9: etcd elects another, Patroni carries on, nothing fails over;
- with `synchronous_mode_strict`, the last replica stopped: the primary's commits wait for a
  standby; each server says so in one line, answers UNAVAILABLE within a caller's deadline
  (store/stall.py) and, once the replica is started again, says so and goes on by itself.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ha_load import LAYOUTS, WiggleOnHa, now_ms
from hacluster import HaCluster, Node, Settings

from tests.waiting import wait_until
from wiggle import errors
from wiggle.client import Client

pytestmark = pytest.mark.timeout(900)

SHORT = "tests/faults/test_patroni.py::test_switchover_then_primary_killed"


@pytest.fixture
def ha() -> Iterator[HaCluster]:
    with HaCluster() as cluster:
        yield cluster


@pytest.fixture
def ha_strict() -> Iterator[HaCluster]:
    """The cluster with `synchronous_mode_strict`: no commit without a standby, ever."""
    with HaCluster(Settings(synchronous_mode_strict=True)) as cluster:
        yield cluster


@pytest.fixture
def ha_links() -> Iterator[HaCluster]:
    """The cluster with every node's links to etcd and to the others cuttable."""
    with HaCluster(links=True) as cluster:
        yield cluster


def _new_leader(ha: HaCluster, old: Node, timeout: float = 120) -> Node:
    found = wait_until(
        lambda: (n := ha.leader()) is not None and n is not old and n,
        timeout,
        f"a leader other than {old.name}",
        interval=0.2,
    )
    assert isinstance(found, Node)
    return found


def _sync_standby(ha: HaCluster) -> Node:
    wait_until(ha.healthy, 120, "a leader and a synchronous standby", interval=0.25)
    return ha.role_of("sync_standby")[0]


@contextlib.contextmanager
def _loaded(ha: HaCluster, layout: str, work: Path) -> Iterator[tuple[WiggleOnHa, Node]]:
    """Wiggle under the full suite's load on `ha`, and the primary once the load runs."""
    run = WiggleOnHa(ha, layout, work)
    try:
        run.warm(starts=40, steps=120)
        _sync_standby(ha)  # healthy before the fault
        leader = ha.leader()
        assert leader is not None
        yield run, leader
    finally:
        run.close()


def _check(ledger, run: WiggleOnHa, scenario: str, fault: str, mark: list[int]) -> list[str]:
    """The scenario's ledger line and its checks; returns what the servers logged since
    `mark` (run.mark() at the fault)."""
    logged = run.logged_since(mark)
    fault += f"; the servers logged {len(logged)} lines"
    tally, lost, ids = run.finish(scenario, fault)
    print("\n".join(["what the servers logged:", *logged]))
    ledger(tally)
    assert lost == 0, tally.line()
    assert tally.completed == len(ids), tally.line()
    assert run.contexts_right(ids), tally.line()
    return logged


def test_switchover_then_primary_killed(ha, tmp_path, ledger):
    """The short suite's: a planned switchover, then the new primary's PostgreSQL killed -9."""
    run = WiggleOnHa(ha, LAYOUTS[0], tmp_path)
    try:
        run.warm(starts=12, steps=30)
        first = ha.leader()
        assert first is not None
        candidate = _sync_standby(ha)
        mark = run.mark()
        switched_ms = now_ms()
        ha.switchover(first, candidate)
        second = _new_leader(ha, first)
        switch_led_ms = now_ms()
        switch = run.recovered(switched_ms, switch_led_ms)
        assert second is candidate

        _sync_standby(ha)  # the old primary back as a replica, a synchronous standby chosen
        killed_ms = now_ms()
        ha.kill_postgres(second)
        third = _new_leader(ha, second)
        crash_led_ms = now_ms()
        crash = run.recovered(killed_ms, crash_led_ms)
        _check(
            ledger,
            run,
            "Patroni switchover, then kill -9 of the new primary's PostgreSQL",
            f"switchover {first.name} -> {second.name}: {switch.says(switch_led_ms)}; "
            f"kill -9 PostgreSQL of {second.name}, {third.name} promoted: "
            f"{crash.says(crash_led_ms)}",
            mark,
        )
    finally:
        run.close()


def _kill_postgres(ha: HaCluster, leader: Node) -> str:
    ha.kill_postgres(leader)
    return f"kill -9 PostgreSQL of {leader.name}, {_new_leader(ha, leader).name} promoted"


def _kill_node(ha: HaCluster, leader: Node) -> str:
    ha.kill_node(leader)
    successor = _new_leader(ha, leader)
    return f"kill -9 Patroni and PostgreSQL of {leader.name}, {successor.name} took the lapsed key"


def _switchover(ha: HaCluster, leader: Node) -> str:
    candidate = ha.role_of("sync_standby")[0]
    ha.switchover(leader, candidate)
    return f"patronictl switchover {leader.name} -> {_new_leader(ha, leader).name}"


FAULTS: dict[str, Callable[[HaCluster, Node], str]] = {
    "kill -9 primary PostgreSQL": _kill_postgres,
    "kill -9 primary node (Patroni too)": _kill_node,
    "Patroni switchover": _switchover,
}


@pytest.mark.full_only(SHORT)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fault", list(FAULTS))
def test_primary_fails_over(ha, tmp_path, ledger, fault, layout):
    with _loaded(ha, layout, tmp_path) as (run, leader):
        mark = run.mark()
        fault_ms = now_ms()
        what = FAULTS[fault](ha, leader)
        led_ms = now_ms()  # Patroni names the new leader (polled every 0.2 s)
        outage = run.recovered(fault_ms, led_ms)
        _check(ledger, run, f"Patroni: {fault}", f"{what}: {outage.says(led_ms)}", mark)


@pytest.mark.full_only(SHORT)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_primary_isolated_demotes_itself(ha_links, tmp_path, ledger, layout):
    ha = ha_links
    with _loaded(ha, layout, tmp_path) as (run, leader):
        mark = run.mark()
        fault_ms = now_ms()
        ha.isolate(leader)
        successor = _new_leader(ha, leader)
        led_ms = now_ms()
        outage = run.recovered(fault_ms, led_ms)
        ha.heal(leader)
        _check(
            ledger,
            run,
            "Patroni: primary cut off from etcd and its replicas",
            f"{leader.name} isolated, {successor.name} promoted: {outage.says(led_ms)}",
            mark,
        )


@pytest.mark.full_only(SHORT)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_etcd_leader_killed(ha, tmp_path, ledger, layout):
    with _loaded(ha, layout, tmp_path) as (run, leader):
        member = ha.etcd_leader()
        assert member is not None
        mark = run.mark()
        fault_ms = now_ms()
        ha.kill_etcd(member)
        wait_until(
            lambda: ha.etcd_leader() not in (None, member), 60, "another etcd leader", interval=0.2
        )
        time.sleep(2 * ha.settings.ttl)  # past a leader key's ttl: renewed through the new one
        run.more_starts(20)
        outage = run.outage(fault_ms)
        assert ha.leader() is leader, "the primary changed, but only etcd's leader was killed"
        new_etcd = ha.etcd_leader()
        assert new_etcd is not None
        _check(
            ledger,
            run,
            "Patroni: the etcd leader killed -9",
            f"etcd leader {member.name} killed, {new_etcd.name} leads; "
            f"{leader.name} stayed primary: {outage.says()}",
            mark,
        )


#: What a caller waits for an answer in the strict scenario (the client's default is 30 s).
DEADLINE_S = 10.0
STALLED = "commits are not coming back"
RESUMED = "commits come back again"


@pytest.mark.full_only("tests/faults/test_commit_stall.py")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_strict_mode_last_replica_stopped(ha_strict, tmp_path, ledger, layout):
    ha = ha_strict
    with _loaded(ha, layout, tmp_path) as (run, leader):
        sync = _sync_standby(ha)
        other = next(n for n in ha.nodes if n not in (leader, sync))
        ha.stop_node(other)  # one replica stopped: the synchronous standby is still there
        run.more_starts(5)
        mark = run.mark()
        stopped_ms = now_ms()
        ha.stop_node(sync)  # the last one: every COMMIT waits for a standby
        flow, version = run.flows[0]
        with Client(run.servers[0][1], timeout=DEADLINE_S, retry_for=0.0) as client:
            began = time.monotonic()
            with pytest.raises(errors.Unavailable) as answer:
                client.start(flow, {"target": 1}, version=version, instance_id="ha-stalled")
            took = time.monotonic() - began
        assert took < DEADLINE_S and "does not finish commits" in str(answer.value), (
            f"after {took:.1f} s: {answer.value}"
        )
        wait_until(
            lambda: sum(STALLED in line for line in run.logged_since(mark)) == 2,
            30,
            "each server saying commits stalled",
            interval=0.2,
        )
        time.sleep(3 * ha.settings.loop_wait)  # the stall goes on for a while
        restarted_ms = now_ms()
        ha.start_patroni(sync)
        # Transactions begun during the stall commit when the standby is back, with the time
        # they began: the first step begun after the restart is the recovery.
        outage = run.recovered(restarted_ms, restarted_ms, pause_ms=0)
        assert outage.first_ms is not None
        logged = _check(
            ledger,
            run,
            "Patroni synchronous_mode_strict: the last replica stopped, then started again",
            f"{sync.name} stopped (the last replica), a start answered UNAVAILABLE after "
            f"{took:.1f} s; {sync.name} started again "
            f"{(restarted_ms - stopped_ms) / 1000:.1f} s after the stop, steps committed "
            f"again {(outage.first_ms - restarted_ms) / 1000:.1f} s after that",
            mark,
        )
        # One line from each server when commits stall, one when they come back: nothing
        # else (the ticker's refused ticks are that same condition).
        assert sum(STALLED in line for line in logged) == 2, logged
        assert sum(RESUMED in line for line in logged) == 2, logged
        assert len(logged) == 4, logged
