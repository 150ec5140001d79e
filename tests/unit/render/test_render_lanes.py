"""One lane (a cluster) per queue when a flow uses several; none when it uses one."""

from __future__ import annotations

import pytest


@pytest.fixture
def saga(g):
    return g.graph(
        "intent",
        {
            "intent": g.task("intent", "hold", queue="payments"),
            "hold": g.task("hold", "parallel-1", queue="inventory"),
            "parallel-1": g.fork({"charge": "charge", "tell": "tell"}, "parallel-1.join"),
            "charge": g.task("charge", "parallel-1.join", queue="psp"),
            "tell": g.task("tell", "parallel-1.join", queue="notifications"),
            "parallel-1.join": g.join("merge", "parallel-1", "confirm", queue="payments"),
            "confirm": g.await_("confirm", "pause", apply="record", queue="inventory"),
            "pause": g.sleep("end", duration_ms=1000),
        },
    )


def test_each_queue_is_a_lane_in_order_of_first_use(saga, dot_of):
    dot = dot_of(saga)
    lanes = [c for c in dot.cluster_attrs if c.startswith("cluster_lane:")]
    assert lanes == [
        "cluster_lane:payments",
        "cluster_lane:inventory",
        "cluster_lane:psp",
        "cluster_lane:notifications",
    ]
    assert "queue <B>psp</B>" in dot.cluster_attrs["cluster_lane:psp"]["label"]


def test_worker_nodes_sit_in_their_queue_lane(saga, dot_of):
    dot = dot_of(saga)
    assert dot.cluster("intent") == "cluster_lane:payments"
    assert dot.cluster("parallel-1.join") == "cluster_lane:payments"  # the combine runs there
    assert dot.cluster("hold") == "cluster_lane:inventory"
    assert dot.cluster("confirm") == "cluster_lane:inventory"  # its apply runs there
    assert dot.cluster("charge") == "cluster_lane:psp"


def test_server_side_nodes_sit_outside_the_lanes(saga, dot_of):
    dot = dot_of(saga)
    assert dot.cluster("parallel-1") is None
    assert dot.cluster("pause") is None
    assert dot.cluster("end") is None


def test_lanes_replace_structure_clusters_but_pairs_keep_their_colour(saga, dot_of):
    dot = dot_of(saga)
    assert not [c for c in dot.cluster_attrs if not c.startswith("cluster_lane:")]
    assert dot.nodes["parallel-1"]["fillcolor"] == dot.nodes["parallel-1.join"]["fillcolor"]


def test_a_single_queue_draws_no_lanes(g, dot_of):
    graph = g.graph(
        "a", {"a": g.task("a", "b", queue="orders"), "b": g.task("b", "end", queue="orders")}
    )
    assert dot_of(graph).cluster_attrs == {}


def test_lanes_rank_the_graph_as_a_whole(saga):
    from wiggle_render import to_dot

    # Without newrank, dot ranks each lane on its own and a fork between two steps of one lane
    # floats above it.
    assert 'newrank="true"' in to_dot(saga).splitlines()[1]
