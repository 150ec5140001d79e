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
- the etcd leader killed -9: etcd elects another, Patroni carries on, nothing fails over.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ha_load import LAYOUTS, WiggleOnHa, now_ms
from hacluster import HaCluster, Node

from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(900)

SHORT = "tests/faults/test_patroni.py::test_switchover_then_primary_killed"


@pytest.fixture
def ha() -> Iterator[HaCluster]:
    cluster = HaCluster()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def ha_links() -> Iterator[HaCluster]:
    """The cluster with every node's links to etcd and to the others cuttable."""
    cluster = HaCluster(links=True)
    try:
        yield cluster
    finally:
        cluster.close()


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
        leader = ha.leader()
        assert leader is not None
        yield run, leader
    finally:
        run.close()


def _check(ledger, run: WiggleOnHa, scenario: str, fault: str) -> None:
    tally, lost, ids = run.finish(scenario, fault)
    ledger(tally)
    assert lost == 0, tally.line()
    assert tally.completed == len(ids), tally.line()
    assert run.contexts_right(ids), tally.line()


def test_switchover_then_primary_killed(ha, tmp_path, ledger):
    """The short suite's: a planned switchover, then the new primary's PostgreSQL killed -9."""
    run = WiggleOnHa(ha, LAYOUTS[0], tmp_path)
    try:
        run.warm(starts=12, steps=30)
        first = ha.leader()
        assert first is not None
        candidate = _sync_standby(ha)
        switched_ms = now_ms()
        ha.switchover(first, candidate)
        second = _new_leader(ha, first)
        switch = run.recovered(switched_ms)
        assert second is candidate

        _sync_standby(ha)  # the old primary back as a replica, a synchronous standby chosen
        killed_ms = now_ms()
        ha.kill_postgres(second)
        third = _new_leader(ha, second)
        crash = run.recovered(killed_ms)
        _check(
            ledger,
            run,
            "Patroni switchover, then kill -9 of the new primary's PostgreSQL",
            f"switchover {first.name} -> {second.name}: {switch.says()}; "
            f"kill -9 PostgreSQL of {second.name}, {third.name} promoted: {crash.says()}",
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
    candidate = _sync_standby(ha)
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
        fault_ms = now_ms()
        what = FAULTS[fault](ha, leader)
        outage = run.recovered(fault_ms)
        _check(ledger, run, f"Patroni: {fault}", f"{what}: {outage.says()}")


@pytest.mark.full_only(SHORT)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_primary_isolated_demotes_itself(ha_links, tmp_path, ledger, layout):
    ha = ha_links
    with _loaded(ha, layout, tmp_path) as (run, leader):
        fault_ms = now_ms()
        ha.isolate(leader)
        successor = _new_leader(ha, leader)
        outage = run.recovered(fault_ms)
        ha.heal(leader)
        _check(
            ledger,
            run,
            "Patroni: primary cut off from etcd and its replicas",
            f"{leader.name} isolated, {successor.name} promoted: {outage.says()}",
        )


@pytest.mark.full_only(SHORT)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_etcd_leader_killed(ha, tmp_path, ledger, layout):
    with _loaded(ha, layout, tmp_path) as (run, leader):
        member = ha.etcd_leader()
        fault_ms = now_ms()
        ha.kill_etcd(member)
        wait_until(lambda: ha.etcd_leader() is not member, 60, "another etcd leader", interval=0.2)
        time.sleep(2 * ha.settings.ttl)  # past a leader key's ttl: renewed through the new one
        run.more_starts(20)
        outage = run.outage(fault_ms)
        assert ha.leader() is leader, "the primary changed, but only etcd's leader was killed"
        _check(
            ledger,
            run,
            "Patroni: the etcd leader killed -9",
            f"etcd leader {member.name} killed, {ha.etcd_leader().name} leads; "
            f"{leader.name} stayed primary: {outage.says()}",
        )
