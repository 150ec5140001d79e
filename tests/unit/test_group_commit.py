"""GroupCommit: concurrent submissions share batches, each gets its own result or error."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from wiggle._group import GroupCommit


def test_a_lone_item_is_committed_at_once_in_a_batch_of_its_own():
    seen: list[list[int]] = []

    def run(items: Sequence[int]) -> list[int]:
        seen.append(list(items))
        return [i * 10 for i in items]

    group = GroupCommit(run)
    assert group.submit(1) == 10
    assert group.submit(2) == 20
    assert seen == [[1], [2]]


def test_items_submitted_while_a_batch_runs_are_committed_together():
    first_running = threading.Event()
    release_first = threading.Event()
    seen: list[list[int]] = []

    def run(items: Sequence[int]) -> list[int | BaseException]:
        seen.append(list(items))
        if items == [0]:
            first_running.set()
            release_first.wait(10)
        return [ValueError(f"bad {i}") if i == 3 else i + 100 for i in items]

    group: GroupCommit[int, int] = GroupCommit(run, max_batch=64, max_active=1)
    results: dict[int, object] = {}

    def submit(i: int) -> None:
        try:
            results[i] = group.submit(i)
        except ValueError as exc:
            results[i] = str(exc)

    threads = [threading.Thread(target=submit, args=(0,))]
    threads[0].start()
    assert first_running.wait(10)
    more = [threading.Thread(target=submit, args=(i,)) for i in range(1, 6)]
    for t in more:
        t.start()
    # Every follower is queued behind the running batch before it is let go.
    while len(group._queue) < 5:
        threading.Event().wait(0.001)
    release_first.set()
    for t in threads + more:
        t.join(10)
    assert results == {0: 100, 1: 101, 2: 102, 3: "bad 3", 4: 104, 5: 105}
    assert seen[0] == [0] and sorted(seen[1]) == [1, 2, 3, 4, 5] and len(seen) == 2
    assert (group.batches, group.items) == (2, 6)
    assert group._active == 0


def test_a_failing_batch_fails_each_of_its_items_and_later_batches_still_run():
    calls = 0

    def run(items: Sequence[int]) -> list[int]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("database gone")
        return list(items)

    group: GroupCommit[int, int] = GroupCommit(run)
    with pytest.raises(RuntimeError, match="database gone"):
        group.submit(1)
    assert group.submit(2) == 2


@pytest.mark.parametrize("max_active", [1, 2, 3])
def test_many_threads_each_get_their_own_result(max_active):
    def run(items: Sequence[int]) -> list[int]:
        return [i * 2 for i in items]

    group: GroupCommit[int, int] = GroupCommit(run, max_batch=7, max_active=max_active)
    out: dict[int, int] = {}
    lock = threading.Lock()

    def worker(base: int) -> None:
        for i in range(base, base + 200):
            got = group.submit(i)
            with lock:
                out[i] = got

    threads = [threading.Thread(target=worker, args=(k * 1000,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out == {i: i * 2 for k in range(16) for i in range(k * 1000, k * 1000 + 200)}
    assert group.items == 3200 and group._active == 0


def test_submit_many_answers_each_item_even_across_batches():
    def run(items: Sequence[int]) -> list[int | BaseException]:
        return [KeyError(i) if i % 5 == 0 else i + 1 for i in items]

    group: GroupCommit[int, int] = GroupCommit(run, max_batch=3, max_active=2)
    out: dict[int, list[object]] = {}

    def worker(k: int) -> None:
        got = group.submit_many(list(range(k * 100, k * 100 + 11)))
        out[k] = [type(g).__name__ if isinstance(g, BaseException) else g for g in got]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for k in range(8):
        base = k * 100
        assert out[k] == ["KeyError" if i % 5 == 0 else i + 1 for i in range(base, base + 11)]
    assert group._active == 0
