"""Where the cursor is in YAML that need not parse (wiggle.lsp._context): `|` marks the cursor."""

from __future__ import annotations

import pytest

from wiggle.lsp._context import Cursor, cursor_at


def _at(document: str) -> Cursor:
    lines = document.split("\n")
    for number, line in enumerate(lines, 1):
        if "|" in line:
            lines[number - 1] = line.replace("|", "", 1)
            return cursor_at(lines, number, line.index("|") + 1)
    raise AssertionError("no cursor")


@pytest.mark.parametrize(
    ("document", "path", "at_key", "prefix", "present"),
    [
        ("wiggle: 1\nname: x\nexec|", (), True, "exec", {"wiggle", "name"}),
        ("steps:\n  - task: val|", ("steps", 0, "task"), False, "val", set()),
        (
            "steps:\n  - task: a\n    |\n    timeout: 3s",
            ("steps", 0),
            True,
            "",
            {"task", "timeout"},
        ),
        ("steps:\n- task: a\n- |", ("steps", 1), True, "", set()),  # a compact sequence
        (
            "steps:\n  - task: a\n    retry: {max_attempts: 5, ba|",
            ("steps", 0, "retry"),
            True,
            "ba",
            {"max_attempts"},
        ),
        ("steps:\n  - {task: a, qu|", ("steps", 0), True, "qu", {"task"}),
        (
            "steps:\n  - parallel:\n      a:\n        - task: x\n    combine: m|",
            ("steps", 0, "combine"),
            False,
            "m",
            set(),
        ),
        ("x:\n  description: >\n    some text |\ny: 1", ("x", "description"), False, "", set()),
        (
            "# comment: not a key\nsteps:  # nor this\n  - await: k|",
            ("steps", 0, "await"),
            False,
            "k",
            set(),
        ),
    ],
)
def test_the_cursor_is_read_from_the_layout(
    document: str, path: tuple[object, ...], at_key: bool, prefix: str, present: set[str]
) -> None:
    cursor = _at(document)
    assert (cursor.path, cursor.at_key, cursor.prefix, set(cursor.present)) == (
        path,
        at_key,
        prefix,
        present,
    )


def test_a_flow_list_spanning_lines_is_followed() -> None:
    cursor = _at("s:\n  - expect:\n      path: [a, b,\n             c, d|")
    assert (cursor.path, cursor.in_list, cursor.prefix, cursor.key) == (
        ("s", 0, "expect", "path"),
        True,
        "d",
        "path",
    )


def test_a_dash_item_is_both_a_list_value_and_a_new_mapping() -> None:
    cursor = _at("expect:\n  visits:\n    - kyc|")
    assert (cursor.path, cursor.at_key, cursor.in_list, cursor.key) == (
        ("expect", "visits", 0),
        True,
        True,
        "visits",
    )
    assert cursor.start == 7  # the word typed starts after the dash


def test_nonsense_never_fails() -> None:
    for document in ["|", "- - - |", "{[{[|", "'unclosed: |", "\t\tx: |", "a: [\n|\n"]:
        _at(document)
