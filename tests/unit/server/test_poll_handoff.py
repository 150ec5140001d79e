"""The hand-off of a new instance's first task to a parked long poll (wiggle/server/_polls.py):
a task leased to a poll reaches the poll or is given back, never neither."""

from __future__ import annotations

import threading

import pytest

from wiggle.engine import EagerRequest, StartResult, TaskActivation
from wiggle.graph import ExecutionMode
from wiggle.server._polls import OpenPoll, OpenPolls, PollWorker

WORKER = PollWorker("w-1", ("default",), ("a",))


def _task(n: int = 1) -> TaskActivation:
    return TaskActivation(
        task_id=f"t{n}", lease=f"l{n}", lease_expires_at_ms=0, instance_id="i", flow="f",
        version="v", node_id="a", activity="a", queue="default", attempt=1, input=None,
        execution_mode=ExecutionMode.SERVER, loop_counts={}, timeout_ms=30_000,
    )  # fmt: skip


def _parked() -> tuple[OpenPolls, OpenPoll]:
    polls, poll = OpenPolls(), OpenPoll(WORKER)
    polls.add(poll)
    poll.park(True)
    return polls, poll


def _start(task: TaskActivation | None, seen: list[EagerRequest | None]):
    def start(eager: EagerRequest | None) -> StartResult:
        seen.append(eager)
        return StartResult("i", "v", True, task if eager is not None else None)

    return start


def test_a_parked_poll_takes_the_first_task_of_a_start():
    polls, poll = _parked()
    seen: list[EagerRequest | None] = []
    given_back: list[TaskActivation] = []
    result, handed = polls.start(_start(_task(), seen), given_back.extend)
    assert seen == [EagerRequest("w-1", ("default",), ("a",))]
    assert handed is True and result.eager_task is None  # the poll's, not the starter's
    assert poll.wake.is_set() and given_back == []
    assert poll.take() == [_task()]


def test_without_a_parked_poll_the_start_is_plain():
    polls, poll = OpenPolls(), OpenPoll(WORKER)
    polls.add(poll)  # open, but claiming rather than parked: it would not wait for an offer
    seen: list[EagerRequest | None] = []
    result, handed = polls.start(_start(_task(), seen), lambda tasks: None)
    assert (seen, handed, result.eager_task) == ([None], None, None)
    poll.park(True)
    poll.ended = True  # EndPolls: its worker drains
    assert polls.start(_start(_task(), []), lambda tasks: None)[1] is None


def test_a_poll_takes_one_offer_at_a_time():
    _polls, poll = _parked()
    assert poll.offer() and not poll.offer()
    assert poll.settle(None) and poll.offer()


def test_a_poll_that_answers_waits_for_the_offer_in_progress_and_answers_its_task():
    polls, poll = _parked()
    leasing = threading.Event()
    finish = threading.Event()

    def slow_start(eager: EagerRequest | None) -> StartResult:
        leasing.set()
        finish.wait(5)
        return StartResult("i", "v", True, _task(2))

    starter = threading.Thread(target=polls.start, args=(slow_start, lambda tasks: None))
    starter.start()
    assert leasing.wait(5)
    answered: list[tuple[list[TaskActivation], list[TaskActivation]]] = []
    closer = threading.Thread(target=lambda: answered.append(poll.close([_task(1)], 4, True)))
    closer.start()
    closer.join(0.2)
    assert closer.is_alive(), "the poll answered while a start was leasing it a task"
    finish.set()
    starter.join(5)
    closer.join(5)
    assert answered == [([_task(1), _task(2)], [])]


def test_a_task_settled_after_the_poll_closed_is_given_back_by_the_starter(monkeypatch):
    from wiggle.server import _polls

    monkeypatch.setattr(_polls, "SETTLE_WAIT_S", 0.01)  # the poll stops waiting for the start
    polls, poll = _parked()
    given_back: list[TaskActivation] = []

    def start(eager: EagerRequest | None) -> StartResult:
        assert poll.close([], 4, True) == ([], [])  # the poll answers first
        return StartResult("i", "v", True, _task(3))

    result, handed = polls.start(start, given_back.extend)
    assert given_back == [_task(3)] and result.eager_task is None
    assert handed is True


@pytest.mark.parametrize(
    ("claimed", "most", "here", "send", "unsent"),
    [
        (0, 4, True, [9], []),
        (2, 2, True, [1, 2], [9]),  # no room left: the handed task goes back
        (1, 4, False, [], [1, 9]),  # the caller went away: everything goes back
    ],
)
def test_what_a_closing_poll_answers_and_gives_back(claimed, most, here, send, unsent):
    polls, poll = _parked()
    polls.start(_start(_task(9), []), lambda tasks: None)
    got = poll.close([_task(n) for n in range(1, claimed + 1)], most, here)
    assert got == ([_task(n) for n in send], [_task(n) for n in unsent])
    assert not poll.offer(), "a closed poll takes no more offers"
