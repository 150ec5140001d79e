"""Where the cursor is in a YAML document that need not parse: the path of keys and list items
leading to it, and whether a key or a value is being typed there.

Completion runs on documents mid-edit, which the compiler's reader refuses, so this reads the
lines by their indentation (block mappings and sequences, compact sequences under a key
included), skips block scalars, and follows flow collections (`[a, b]`, `{k: v}`) across lines.
It is a reading of the layout, not a parser: it never fails, and where the text is ambiguous
(`- word` is a list item or the first key of a mapping item) it says both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Cursor", "cursor_at"]

Part = str | int

_KEY = re.compile(
    r"""("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"{\[\]},:&*!|>%@`-][^#:]*?|-[^\s#:][^#:]*?)\s*:(?:\s|$)"""
)
_WORD_TAIL = re.compile(r"[^\s,\[\]{}:'\"]*$")


@dataclass(frozen=True)
class Cursor:
    """What is being typed at the cursor.

    `path` is that of the mapping whose key is typed (`at_key`), or of the value typed: the
    key's path, or the list's path when `in_list`. `prefix` is the part of the word already
    typed, which starts at 1-based `start` on the cursor's line."""

    path: tuple[Part, ...]
    at_key: bool
    in_list: bool = False
    prefix: str = ""
    start: int = 1
    present: frozenset[str] = frozenset()

    @property
    def key(self) -> str | None:
        """The key whose value is typed (the list's key for a list item), if any."""
        for part in reversed(self.path):
            if isinstance(part, str):
                return part
        return None


@dataclass
class _Frame:
    indent: int
    part: Part
    is_item: bool
    count: int = 0  # items seen under this key (or item, for "- - x")


def _strip_comment(text: str) -> str:
    quote = ""
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"" and (i == 0 or text[i - 1] in " \t[{,:"):
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i]
    return text


def _unquote(key: str) -> str:
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "'\"":
        return key[1:-1]
    return key


def _depth(text: str) -> int:
    """How many flow collections `text` leaves open (strings skipped)."""
    depth, quote = 0, ""
    for c in text:
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth = max(depth - 1, 0)
    return depth


class _Reader:
    def __init__(self) -> None:
        self.frames: list[_Frame] = []
        self.scalar_indent: int | None = None  # inside a block scalar of a key at this indent
        self.flow: str | None = None  # the text of a flow collection still open
        self.flow_path: tuple[Part, ...] = ()

    def path(self) -> tuple[Part, ...]:
        return tuple(f.part for f in self.frames)

    def _item(self, column: int) -> None:
        while self.frames and (
            self.frames[-1].indent > column
            or (self.frames[-1].indent == column and self.frames[-1].is_item)
        ):
            self.frames.pop()
        index = 0
        if self.frames:
            index = self.frames[-1].count
            self.frames[-1].count += 1
        self.frames.append(_Frame(column, index, True))

    def _key(self, column: int, key: str) -> None:
        while self.frames and self.frames[-1].indent >= column:
            self.frames.pop()
        self.frames.append(_Frame(column, key, False))

    def feed(self, raw: str) -> None:
        """Take in one whole line above the cursor."""
        if self.flow is not None:
            self.flow += "\n" + raw
            if _depth(self.flow) == 0:
                self.flow = None
            return
        text = _strip_comment(raw).rstrip()
        content = text.lstrip(" ")
        column = len(text) - len(content)
        if self.scalar_indent is not None:
            if not content or column > self.scalar_indent:
                return
            self.scalar_indent = None
        if not content or content.startswith(("---", "...", "%")):
            return
        while content == "-" or content.startswith(("- ", "-\t")):
            self._item(column)
            rest = content[1:].lstrip(" \t")
            column += len(content) - len(rest)
            content = rest
        if not content:
            return
        found = _KEY.match(content)
        if found is None:
            self._open_flow(content, self.path())
            return
        self._key(column, _unquote(found.group(1)))
        value = content[found.end() :].strip()
        if value[:1] in ("|", ">"):
            self.scalar_indent = column
        self._open_flow(value, self.path())

    def _open_flow(self, value: str, path: tuple[Part, ...]) -> None:
        if value[:1] in ("[", "{") and _depth(value) > 0:
            self.flow, self.flow_path = value, path

    def cursor(self, before: str, above: Sequence[str], below: Sequence[str]) -> Cursor:
        """The cursor, `before` being its line's text before it."""
        word = _WORD_TAIL.search(before)
        prefix = word.group(0) if word else ""
        found = self._place(before, above, below)
        start = len(before) - len(prefix) + 1
        return Cursor(found.path, found.at_key, found.in_list, prefix, start, found.present)

    def _place(self, before: str, above: Sequence[str], below: Sequence[str]) -> Cursor:
        if self.flow is not None:
            return _in_flow(self.flow + "\n" + before, self.flow_path)
        text = _strip_comment(before)
        content = text.lstrip(" ")
        column = len(text) - len(content)
        if self.scalar_indent is not None and (not content or column > self.scalar_indent):
            return Cursor(self.path(), at_key=False)
        new_item = False
        while content == "-" or content.startswith(("- ", "-\t")):
            self._item(column)
            new_item = True
            rest = content[1:].lstrip(" \t")
            column += len(content) - len(rest)
            content = rest
        found = _KEY.match(content)
        if found is not None:
            self._key(column, _unquote(found.group(1)))
            value = content[found.end() :].lstrip()
            if value[:1] in ("[", "{"):
                return _in_flow(value, self.path())
            return Cursor(self.path(), at_key=False)
        if content[:1] in ("[", "{"):
            return _in_flow(content, self.path())
        while self.frames and self.frames[-1].indent >= column and not self.frames[-1].is_item:
            self.frames.pop()
        if self.frames and self.frames[-1].is_item and self.frames[-1].indent >= column:
            self.frames.pop()
        present = _present(column, above, below, new_item)
        return Cursor(self.path(), at_key=True, in_list=new_item, present=present)


def _in_flow(text: str, path: tuple[Part, ...]) -> Cursor:
    """Where the end of `text`, which opens a flow collection at `path`, is in it."""
    # Each open container: whether it is a list, the key being written (a mapping's), how many
    # items it has so far (a list's) and the keys it has.
    stack: list[_Flow] = []
    parts: list[Part] = list(path)
    quote = ""
    token_start = 0
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = ""
            continue
        if c in "'\"":
            quote = c
        elif c in "[{":
            if stack:
                top = stack[-1]
                parts.append(top.items if top.is_list else (top.key or ""))
            stack.append(_Flow(c == "["))
            token_start = i + 1
        elif c in "]}":
            if stack:
                stack.pop()
                if len(parts) > len(path):
                    parts.pop()
            token_start = i + 1
        elif c == "," and stack:
            top = stack[-1]
            if top.is_list:
                top.items += 1
            else:
                top.key = None
            token_start = i + 1
        elif (
            c == ":" and stack and not stack[-1].is_list and text[i + 1 : i + 2] in (" ", "\n", "")
        ):
            key = _unquote(text[token_start:i])
            stack[-1].key = key
            stack[-1].keys.add(key)
            token_start = i + 1
    if not stack:
        return Cursor(tuple(parts), at_key=False)
    top = stack[-1]
    if top.is_list:
        return Cursor(tuple(parts), at_key=False, in_list=True)
    if top.key is None:
        return Cursor(tuple(parts), at_key=True, present=frozenset(top.keys))
    return Cursor((*parts, top.key), at_key=False)


@dataclass
class _Flow:
    is_list: bool
    key: str | None = None
    items: int = 0
    keys: set[str] = field(default_factory=set)


def _present(
    column: int, above: Sequence[str], below: Sequence[str], new_item: bool
) -> frozenset[str]:
    """The keys written at `column` in the mapping the cursor is in, above and below it."""
    keys: set[str] = set()
    for lines, upward in ((above, True), (below, False)):
        if upward and new_item:
            continue
        ordered = reversed(lines) if upward else lines
        for raw in ordered:
            text = _strip_comment(raw).rstrip()
            content = text.lstrip(" ")
            indent = len(text) - len(content)
            if not content:
                continue
            dash = content.startswith(("- ", "-\t"))
            if dash and indent + 2 == column:
                if upward:
                    found = _KEY.match(content[2:].lstrip())
                    if found:
                        keys.add(_unquote(found.group(1)))
                break
            if indent < column:
                break
            if indent == column:
                found = _KEY.match(content)
                if found:
                    keys.add(_unquote(found.group(1)))
    return frozenset(keys)


def cursor_at(lines: Sequence[str], line: int, column: int) -> Cursor:
    """The cursor before 1-based `column` of 1-based `line` of `lines`."""
    reader = _Reader()
    for raw in lines[: line - 1]:
        reader.feed(raw)
    current = lines[line - 1] if 1 <= line <= len(lines) else ""
    return reader.cursor(current[: column - 1], lines[: line - 1], lines[line:])
