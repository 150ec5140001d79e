"""A document's lines, and positions between the compiler's and the protocol's.

The compiler places a problem at a 1-based line and a 1-based column counted in characters
(`wiggle.errors.Diagnostic`, `SourceMap`); the protocol at a 0-based line and a 0-based
character counted in the code units of the encoding agreed at initialisation (UTF-16 unless the
client offered another). Lines are split as the protocol splits them: at `\\n`, `\\r\\n`, `\\r`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lsprotocol import types

__all__ = ["Lines", "Span"]

_BREAK = re.compile(r"\r\n|\r|\n")
_WORD = re.compile(r"[A-Za-z0-9_.:$@/-]")
# Where a plain scalar or key ends: a separator, a comment, or a colon that ends a key.
_PLAIN_END = re.compile(r"[,\]}]|\s#|:(?:\s|$)|\s+$")


@dataclass(frozen=True)
class Span:
    """A stretch of one line: 1-based line, 1-based first and past-the-end columns (characters)."""

    line: int
    start: int
    end: int

    def covers(self, line: int, column: int) -> bool:
        return line == self.line and self.start <= column <= self.end


class Lines:
    """The lines of one text, for converting positions in either direction."""

    def __init__(self, text: str, encoding: str = types.PositionEncodingKind.Utf16) -> None:
        self.lines = _BREAK.split(text)
        self.encoding = str(encoding)

    def __len__(self) -> int:
        return len(self.lines)

    def line(self, number: int) -> str:
        """Line `number` (1-based); empty past either end."""
        return self.lines[number - 1] if 1 <= number <= len(self.lines) else ""

    def _units(self, text: str) -> int:
        if self.encoding == types.PositionEncodingKind.Utf8:
            return len(text.encode("utf-8", "surrogatepass"))
        if self.encoding == types.PositionEncodingKind.Utf32:
            return len(text)
        return len(text.encode("utf-16-le", "surrogatepass")) // 2

    def position(self, line: int, column: int) -> types.Position:
        """The protocol's position of 1-based (line, column); 0 means the start (unknown)."""
        number = min(max(line, 1), max(len(self.lines), 1))
        text = self.line(number)
        column = min(max(column, 1), len(text) + 1)
        return types.Position(line=number - 1, character=self._units(text[: column - 1]))

    def range(self, span: Span) -> types.Range:
        return types.Range(
            start=self.position(span.line, span.start), end=self.position(span.line, span.end)
        )

    def whole_line(self, line: int, last: int | None = None) -> types.Range:
        """From the start of 1-based `line` to the end of `last` (default the same line)."""
        last = line if last is None else last
        return types.Range(
            start=self.position(line, 1), end=self.position(last, len(self.line(last)) + 1)
        )

    def at(self, position: types.Position) -> tuple[int, int]:
        """1-based (line, column in characters) of a protocol position, clamped into the text."""
        number = position.line + 1
        text = self.line(number)
        if self.encoding == types.PositionEncodingKind.Utf32:
            return number, min(position.character, len(text)) + 1
        units = 0
        for index, char in enumerate(text):
            if units >= position.character:
                return number, index + 1
            units += self._units(char)
        return number, len(text) + 1

    def token(self, line: int, column: int) -> Span:
        """The YAML token starting at 1-based (line, column): a quoted string to its closing
        quote, a flow collection to its end on the line, a plain scalar or key to the next
        separator; at least one character, where the line has one."""
        text = self.line(line)
        start = min(max(column, 1), len(text) + 1)
        i = start - 1
        if i >= len(text):
            return Span(line, start, start)
        first = text[i]
        if first in "'\"":
            close = text.find(first, i + 1)
            end = len(text) if close < 0 else close + 1
        elif first in "[{":
            depth, end = 0, len(text)
            for j in range(i, len(text)):
                depth += 1 if text[j] in "[{" else -1 if text[j] in "]}" else 0
                if depth == 0:
                    end = j + 1
                    break
        else:
            found = _PLAIN_END.search(text, i + 1)
            end = found.start() if found else len(text.rstrip())
            end = max(end, i + 1)
        return Span(line, start, end + 1)

    def word(self, line: int, column: int) -> Span | None:
        """The name-like run of characters around 1-based (line, column), if any."""
        text = self.line(line)
        start = end = column - 1
        while start > 0 and _WORD.match(text[start - 1]):
            start -= 1
        while end < len(text) and _WORD.match(text[end]):
            end += 1
        return Span(line, start + 1, end + 1) if end > start else None
