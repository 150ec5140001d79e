"""Search attributes and the filter language: finding instances by a business key."""

from __future__ import annotations

import pytest

from wiggle.engine import InstanceFilter, InstanceStatus
from wiggle.errors import InvalidRequest
from wiggle.filters import parse_filter

ORDERS = """
wiggle: 1
name: orders
search:
  order: /order_id
  customer: /customer/id
  total: {pointer: /total_cents, type: number}
  vip: {pointer: /vip, type: bool}
  due: {pointer: /due, type: time}
steps:
  - task: price
  - task: ship
"""


def _find(engine, *where: str, **kw) -> list[str]:
    page = engine.find_instances(InstanceFilter(where=parse_filter(where), **kw), limit=100)
    return sorted(v.instance_id for v in page.instances)


def _start(engine, iid: str, **ctx) -> str:
    return engine.start("orders", ctx, instance_id=iid).instance_id


def test_search_attributes_find_instances_by_value_and_comparison(make_driver):
    d = make_driver(
        {"price": lambda c: {**c, "total_cents": c["total_cents"] * 2}, "ship": lambda c: c}
    )
    d.deploy(ORDERS)
    e = d.engine
    _start(
        e,
        "o1",
        order_id="A-1001",
        customer={"id": "c-7"},
        total_cents=4000,
        vip=True,
        due="2026-12-24T10:00:00Z",
    )
    _start(e, "o2", order_id="A-1002", customer={"id": "c-8"}, total_cents=9000, vip=False)
    _start(e, "o3", order_id=1003, total_cents="lots")  # a number as a string key; a bad total
    assert _find(e, "order=A-1002") == ["o2"]
    assert _find(e, "order=1003") == ["o3"]
    assert _find(e, "order~a-100") == ["o1", "o2"]
    assert _find(e, "customer=c-7") == ["o1"]
    assert _find(e, "total>5000") == ["o2"]
    assert _find(e, "total>=4000", "total<=4000") == ["o1"]
    assert _find(e, "vip=true") == ["o1"]
    assert _find(e, "vip!=true") == ["o2", "o3"]  # absent counts as not equal
    assert _find(e, "due<2027-01-01T00:00:00Z") == ["o1"]
    view = e.describe("o1")
    assert view.search == {
        "order": "A-1001",
        "customer": "c-7",
        "total": 4000,
        "vip": True,
        "due": "2026-12-24T10:00:00.000Z",
    }
    assert e.describe("o3").search == {"order": "1003"}  # total is not a number: absent


def test_search_values_follow_the_context_as_steps_change_it(make_driver):
    d = make_driver(
        {
            "price": lambda c: {
                **c,
                "total_cents": c["total_cents"] * 2,
                "order_id": "B-" + c["order_id"],
            },
            "ship": lambda c: {k: v for k, v in c.items() if k != "customer"},
        }
    )
    d.deploy(ORDERS)
    e = d.engine
    _start(e, "o1", order_id="1", customer={"id": "c-1"}, total_cents=3000)
    assert d.run("o1").status is InstanceStatus.COMPLETED
    assert _find(e, "total=6000") == ["o1"]
    assert _find(e, "order=B-1") == ["o1"]
    assert _find(e, "order=1") == []
    assert _find(e, "customer=c-1") == []  # removed from the context: absent
    (listed,) = e.find_instances(InstanceFilter(where=parse_filter(["order=B-1"]))).instances
    assert listed.search == {"order": "B-1", "total": 6000}


def test_built_in_fields_of_the_filter(make_driver):
    def price(c):
        if c.get("bad"):
            from engine_testkit import Fail

            raise Fail("card declined by issuer", non_retryable=True)
        return c

    d = make_driver({"price": price, "ship": lambda c: c})
    flow = d.deploy(ORDERS)
    e = d.engine
    ok = _start(e, "ok", order_id="1")
    bad = _start(e, "bad", order_id="2", bad=True)
    d.run(ok)
    d.run(bad)
    waiting = _start(e, "waiting", order_id="3")
    assert _find(e, "status=FAILED") == ["bad"]
    assert _find(e, "status=completed,failed") == ["bad", "ok"]
    assert _find(e, "status!=RUNNING") == ["bad", "ok"]
    assert _find(e, "reason~DECLINED") == ["bad"]
    assert _find(e, "node=price") == ["bad", "waiting"]  # where it failed, where it is
    assert _find(e, "flow=orders", "id~ai") == ["waiting"]
    assert _find(e, f"version={flow.version[7:19]}") == ["bad", "ok", "waiting"]
    assert _find(e, "version=abcdef") == []
    assert _find(e, "age<1h") == ["bad", "ok", "waiting"]
    assert _find(e, "age>1h") == []
    assert waiting


@pytest.mark.parametrize(
    "where,message",
    [
        ("colour=red", "'colour' is not a built-in field .* nor a search attribute declared"),
        ("total>lots", "total is a number"),
        ("vip>true", "a bool attribute takes = or !="),
        ("status=BOGUS", "'BOGUS' is not a status"),
        ("age>soon", "'soon' is not a duration"),
        ("version=xyz", "at least its first 4 hex digits"),
        ("due>tomorrow", "an RFC 3339 instant"),
        ("total~5", r"~ \(contains\) needs a string attribute"),
    ],
)
def test_a_bad_filter_is_refused_with_what_to_write(make_driver, where, message):
    d = make_driver({})
    d.deploy(ORDERS)
    with pytest.raises(InvalidRequest, match=message):
        d.engine.find_instances(InstanceFilter(where=parse_filter([where])))


@pytest.mark.parametrize(
    "text,message",
    [
        ("status", "is not FIELD OP VALUE"),
        ("status=", "has no value"),
        ("age=1h", "age takes > >= < <=, not ="),
        ("Total>5", "is not FIELD OP VALUE"),
    ],
)
def test_the_filter_grammar_says_what_is_wrong(text, message):
    with pytest.raises(InvalidRequest, match=message):
        parse_filter([text])


def test_the_same_name_with_two_types_needs_a_flow(make_driver):
    d = make_driver({})
    d.deploy(ORDERS)
    d.deploy("wiggle: 1\nname: other\nsearch: {total: /t}\nsteps:\n  - task: x\n")
    with pytest.raises(InvalidRequest, match=r"has different types .* add flow=NAME"):
        d.engine.find_instances(InstanceFilter(where=parse_filter(["total=5"])))
    # With the flow named, the type is known.
    assert (
        d.engine.find_instances(
            InstanceFilter(where=parse_filter(["flow=orders", "total=5"]))
        ).instances
        == []
    )
