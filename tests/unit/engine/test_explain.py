"""The explanation sentences (engine/reads/explain.py): one per token state, over plain facts."""

from __future__ import annotations

from wiggle.engine import TokenState, WorkerSeen
from wiggle.engine.reads.explain import Facts, explain, format_duration, format_instant
from wiggle.engine.reads.workers import WorkerBook, WorkerNote
from wiggle.graph import Await, ForEach, Fork, Join, Retry, Task

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
RETRY = Retry(5, "exponential", 100, 10_000)
VALIDATE = Task("validate", "validate", "loans", RETRY, 60_000, "end", False)
WINDOW = 30_000


def _worker(wid, queues, activities=(), last=T0):
    return WorkerSeen(wid, tuple(queues), tuple(activities), 4, "py", last - 60_000, last)


def _ready(**kw):
    return Facts(
        TokenState.READY, VALIDATE, queue="loans", activity="validate", ready_at_ms=T0, **kw
    )


def test_formats():
    assert format_instant(T0) == "2026-01-01T00:00:00Z"
    assert [format_duration(ms) for ms in (5, 42_000, 303_000, 7_500_000, 90_000_000)] == [
        "5 ms",
        "42 s",
        "5 min 3 s",
        "2 h 5 min",
        "1 d 1 h",
    ]


def test_ready_with_nobody_polling_the_queue():
    text = explain(_ready(), [_worker("w1", ["default"])], T0 + 1000, WINDOW)
    assert text == (
        "READY on queue `loans` since 2026-01-01T00:00:00Z: "
        "no worker has polled `loans` in the last 30 s"
    )


def test_ready_names_the_last_worker_that_once_polled_the_queue():
    old = _worker("gone", ["loans"], last=T0 - 120_000)
    text = explain(_ready(), [old], T0, WINDOW)
    assert text.endswith("(last: gone at 2025-12-31T23:58:00Z)")


def test_ready_with_workers_lacking_the_activity():
    workers = [_worker("w2", ["loans"], ["other"]), _worker("w1", ["loans"], ["x"])]
    text = explain(_ready(), workers, T0, WINDOW)
    assert text.endswith("the workers polling `loans` do not have activity `validate` (w1, w2)")


def test_ready_with_able_workers_waits_for_a_slot():
    workers = [_worker("w1", ["loans"], ["validate"]), _worker("w2", ["loans"])]  # [] = any
    assert explain(_ready(), workers, T0, WINDOW).endswith(
        "waiting for a free slot on the 2 workers polling `loans`"
    )


def test_leased_and_expired():
    facts = Facts(
        TokenState.LEASED,
        VALIDATE,
        attempt=2,
        activity="validate",
        lease_owner="w1",
        lease_expires_at_ms=T0 + 5000,
    )
    assert explain(facts, [], T0, WINDOW) == (
        "leased by worker w1 until 2026-01-01T00:00:05Z: running `validate` (attempt 2 of 5)"
    )
    assert "the lease has expired" in explain(facts, [], T0 + 6000, WINDOW)


def test_waiting_kinds():
    retry = Facts(
        TokenState.WAITING,
        VALIDATE,
        attempt=3,
        wait_kind="retry",
        wake_at_ms=T0,
        last_error="card declined",
    )
    assert explain(retry, [], T0, WINDOW) == (
        "retrying after backoff until 2026-01-01T00:00:00Z "
        "(attempt 3 of 5, last error: card declined)"
    )
    sleep = Facts(TokenState.WAITING, None, wait_kind="sleep", wake_at_ms=T0)
    assert explain(sleep, [], T0, WINDOW) == "sleeping until 2026-01-01T00:00:00Z"
    child = Facts(
        TokenState.WAITING, None, wait_kind="child", child_instance_id="c1", child_flow="acct"
    )
    assert explain(child, [], T0, WINDOW) == "waiting for child instance c1 (flow `acct`) to finish"
    held = Facts(TokenState.WAITING, None, wait_kind="held", branch="7")
    assert explain(held, [], T0, WINDOW).startswith("for_each item 7 is held back")


def test_awaiting_with_and_without_a_deadline():
    escalate = Await("kyc", "kyc_result", 3_600_000, "escalate", None, "next")
    facts = Facts(TokenState.AWAITING, escalate, wake_at_ms=T0 + 3_600_000, since_ms=T0)
    assert explain(facts, [], T0, WINDOW) == (
        "waiting for signal `kyc_result` since 2026-01-01T00:00:00Z "
        "(deadline 2026-01-01T01:00:00Z, then the on_timeout steps)"
    )
    plain = Await("kyc", "kyc_result", 3_600_000, "next", None, "next")
    facts = Facts(TokenState.AWAITING, plain, wake_at_ms=T0 + 3_600_000, since_ms=T0)
    assert explain(facts, [], T0, WINDOW).endswith("then the flow goes on without it)")
    forever = Await("kyc", "kyc_result", None, None, None, "next")
    facts = Facts(TokenState.AWAITING, forever, since_ms=T0)
    assert explain(facts, [], T0, WINDOW).endswith("(no deadline)")


def test_joined_fork_foreach_and_branch():
    each = ForEach("pages", "/pages", "ocr", "j", None)
    facts = Facts(TokenState.JOINED, each, branches_total=8, branches_pending=("1", "4", "6"))
    assert explain(facts, [], T0, WINDOW) == "waiting for 3 of 8 `for_each` items"
    fork = Fork("f", {"payment": "a", "shipping": "b"}, "j")
    facts = Facts(TokenState.JOINED, fork, branches_total=2, branches_pending=("shipping",))
    assert explain(facts, [], T0, WINDOW) == "waiting for 1 of 2 parallel branches (shipping)"
    join = Join("j", "merge", "default", RETRY, 60_000, "f", "end")
    facts = Facts(TokenState.JOINED, join, branch="payment")
    assert explain(facts, [], T0, WINDOW) == (
        "branch payment finished at `j`; waiting for the other branches to join"
    )


def test_done_has_no_sentence():
    assert explain(Facts(TokenState.DONE, VALIDATE), [], T0, WINDOW) == ""


def test_worker_book_writes_at_most_every_interval_unless_the_worker_changed():
    book = WorkerBook(every_ms=60_000)
    note = WorkerNote("w1", ("q",), ("a",), 4, "py")
    assert book.due(note) is True
    assert book.due(note) is False  # within the interval: no write
    assert book.due(WorkerNote("w1", ("q", "r"), ("a",), 4, "py")) is True  # changed: write
    book.forget("w1")
    assert book.due(WorkerNote("w1", ("q", "r"), ("a",), 4, "py")) is True
