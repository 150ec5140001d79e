"""A migration's renames applied to the recorded inputs all at once (store/inputs.py)."""

from __future__ import annotations

from wiggle.engine.store.inputs import RecordedInput, snapshot_of


def _at(ms: int) -> RecordedInput:
    return RecordedInput({"ms": ms}, {}, ms)


def test_renames_apply_at_once_so_a_chain_or_a_swap_moves_each_input_one_step() -> None:
    recorded = {"a": _at(1), "b": _at(2), "c": _at(3)}
    assert snapshot_of(recorded, {"a": "b", "b": "c"}) == {"b": _at(1), "c": _at(2)}
    assert snapshot_of(recorded, {"a": "b", "b": "a"}) == {"a": _at(2), "b": _at(1), "c": _at(3)}


def test_a_node_renamed_onto_loses_its_own_input_even_when_the_source_never_ran() -> None:
    recorded = {"b": _at(2), "c": _at(3)}
    assert snapshot_of(recorded, {"a": "b"}) == {"c": _at(3)}
    assert snapshot_of(recorded, {"c": "c"}) == recorded
