"""The runner judges a RUNNING instance parked from the trace's step counts and the instance's
view; the counts must be taken first. The trace is shared by the cases running at once, so
another case may read new lines into it while this one waits for its view: a step that started
after the view was read must not be counted against that view."""

from __future__ import annotations

from types import SimpleNamespace

from wiggle.conformance._runner import look


class _Watch:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def counts(self) -> dict[str, int]:
        return {node: self.lines.count(node) for node in set(self.lines)}


class _Client:
    """Reads the view while the step is still READY, and meanwhile the worker starts it and
    another case's loop reads its trace line."""

    def __init__(self, watch: _Watch) -> None:
        self.watch = watch

    def describe(self, root: str) -> SimpleNamespace:
        view = SimpleNamespace(tokens=[SimpleNamespace(node_id="slow", state="READY")])
        self.watch.lines.append("slow")
        return view


def test_the_counts_precede_the_view_they_are_judged_with():
    watch = _Watch()
    counts, view = look(watch, _Client(watch), "i1")
    assert [t.state for t in view.tokens] == ["READY"]
    # The step started after the view was read: the view's READY token is not "parked after
    # it ran", and the counts must not say it ran.
    assert counts.get("slow", 0) == 0
