"""YAML/JSON text → plain JSON data plus the source position of every value.

The tree is built from the parser's event stream rather than by ruamel's composer: the composer
recurses once per nesting level and expands aliases, and we want neither. Building from events
lets us refuse anchors, duplicate keys, deep nesting and out-of-range numbers the moment they
appear, before any large structure exists. JSON is read by the same code, since JSON is YAML.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from ruamel.yaml.reader import ReaderError

from wiggle.errors import Diagnostic, FlowError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_SAFE_INTEGER", "Loaded", "SourceMap", "load_document"]

MAX_BYTES = 1 << 20
MAX_DEPTH = 64
#: Integers beyond this lose precision in JavaScript and in every float-based JSON parser.
MAX_SAFE_INTEGER = 2**53

Path = tuple[str | int, ...]

# YAML 1.2 core schema, which is also what makes a JSON document read the same as YAML.
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_TRUE = re.compile(r"^(?:true|True|TRUE)$")
_FALSE = re.compile(r"^(?:false|False|FALSE)$")
_INT10 = re.compile(r"^[-+]?[0-9]+$")
_INT8 = re.compile(r"^0o[0-7]+$")
_INT16 = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_SPECIAL_FLOAT = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$")
_STR_TAG = "tag:yaml.org,2002:str"
# A run of openers is nesting no matter what follows; catching it on the raw text avoids
# feeding thousands of brackets to the scanner, whose simple-key bookkeeping is slow on them.
_BRACKET_RUN = re.compile(r"(?:[\[{][ \t\r\n]*){" + str(MAX_DEPTH + 1) + "}")


@dataclass
class SourceMap:
    """Where each value (by path) and each mapping key (by the path it leads to) was written."""

    file: str
    values: dict[Path, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)
    # The style of each string scalar (None plain, '"', "'", '|', '>') and the text's lines:
    # enough to point inside a string, at a position an expression's checker reports.
    styles: dict[Path, str | None] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def value(self, path: Path) -> tuple[int, int]:
        """1-based (line, column) of the value at `path`, or of its nearest written ancestor."""
        for n in range(len(path), -1, -1):
            pos = self.values.get(path[:n])
            if pos is not None:
                return pos
        return (0, 0)

    def key(self, path: Path) -> tuple[int, int]:
        """Position of the key naming `path` (falls back to the value's position)."""
        return self.keys.get(path) or self.value(path)

    def inside(self, path: Path, line: int, column: int) -> tuple[int, int]:
        """The file's (line, column) of the 1-based (line, column) inside the string at
        `path`. Exact for plain, quoted, literal and folded scalars, over one line or many; a
        quoted string with escapes before the point is off by what they change."""
        at_line, at_column = self.value(path)
        if path not in self.styles or at_line == 0:
            return at_line, at_column
        style = self.styles[path]
        if style == "|":
            # The content starts on the line after the indicator, at the block's indentation
            # (its first line's); a more indented line keeps the extra spaces in the string.
            block = next((t for t in self.lines[at_line:] if t.strip()), "")
            indent = len(block) - len(block.lstrip(" "))
            return at_line + line, indent + column
        if style == ">":
            found = self._folded(at_line + 1, None, line, column)
        else:
            found = self._folded(at_line, at_column + (style in ('"', "'")), line, column)
        return found or (at_line, at_column)

    def _folded(
        self, first: int, first_column: int | None, line: int, column: int
    ) -> tuple[int, int] | None:
        """Where (line, column) of a folded string lies in the file: YAML joins the string's
        source lines with one space, and each blank line between them is a line break.
        `first_column` is where the text starts on line `first` (None: at its indent)."""
        at_line, at_column = 1, 1  # the string's position of the current source line's start
        previous: int | None = None  # length of the previous source line's text
        breaks = 0
        for n in range(first, len(self.lines) + 1):
            text = self.lines[n - 1]
            if n == first and first_column is not None:
                start, content = first_column, text[first_column - 1 :]
            elif not text.strip():
                breaks += 1
                continue
            else:
                indent = len(text) - len(text.lstrip(" "))
                start, content = indent + 1, text[indent:]
            if previous is not None:
                if breaks:
                    at_line, at_column = at_line + breaks, 1
                else:
                    at_column += previous + 1
            breaks = 0
            if at_line > line:
                return None
            if at_line == line and column <= at_column + len(content):
                return n, start + column - at_column
            previous = len(content.rstrip())
        return None

    def diagnostic(self, path: Path, message: str, *, at_key: bool = False) -> Diagnostic:
        line, column = self.key(path) if at_key else self.value(path)
        return Diagnostic(self.file, line, column, message, pointer(path))


@dataclass(frozen=True)
class Loaded:
    value: Any
    source: SourceMap


def pointer(path: Path) -> str:
    """RFC 6901 JSON pointer of `path`."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _fail(file: str, line: int, column: int, message: str) -> FlowError:
    return FlowError([Diagnostic(file, line, column, message)])


def _pos(event: Event) -> tuple[int, int]:
    mark = event.start_mark
    return (mark.line + 1, mark.column + 1)


def _double_quoted(event: ScalarEvent, file: str) -> str:
    """The text of a double-quoted scalar with JSON-style surrogate pair escapes joined.

    The scanner decodes `"\\ud83d\\ude00"` as two lone surrogates, where JSON means one
    character; a surrogate left unpaired has no UTF-8 form and could never be hashed.
    """
    text: str = event.value
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        except UnicodeDecodeError:
            raise _fail(file, *_pos(event), "string has an unpaired surrogate escape") from None
    return text


def _scalar(event: ScalarEvent, file: str) -> Any:
    text: str = _double_quoted(event, file) if event.style == '"' else event.value
    if event.tag is not None and event.tag != _STR_TAG:
        raise _fail(file, *_pos(event), f"YAML tags are not allowed (found {event.tag})")
    if event.style is not None or event.tag == _STR_TAG:
        return text
    if _NULL.match(text):
        return None
    if _TRUE.match(text):
        return True
    if _FALSE.match(text):
        return False
    if _INT10.match(text) or _INT8.match(text) or _INT16.match(text):
        # Refuse before converting: int() of a 5,000-digit string is itself an error.
        digits = text.lstrip("+-")
        if len(digits) > 18:
            number = MAX_SAFE_INTEGER + 1
        else:
            number = int(digits, 0) if digits[:2] in ("0o", "0x") else int(digits, 10)
        if number > MAX_SAFE_INTEGER:
            raise _fail(file, *_pos(event), f"integer {text[:40]} is out of range (at most ±2^53)")
        return -number if text.startswith("-") else number
    if _FLOAT.match(text):
        value = float(text)
        if math.isinf(value):
            raise _fail(file, *_pos(event), f"number {text[:40]} is out of range")
        return value
    if _SPECIAL_FLOAT.match(text):
        raise _fail(file, *_pos(event), f"{text} is not a JSON number")
    return text


def _check_size_and_text(source: str | bytes, file: str, max_bytes: int) -> str:
    # len() of a str is a lower bound on its UTF-8 size, so a huge str is refused without encoding.
    size = len(source)
    if isinstance(source, str) and size <= max_bytes:
        size = len(source.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise _fail(file, 1, 1, f"document is {size} bytes; the limit is {max_bytes} bytes")
    if isinstance(source, bytes):
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _fail(file, 1, 1, f"document is not UTF-8: {exc.reason}") from None
    else:
        text = source
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(file, 1, 1, "document contains unpaired surrogate characters") from None
    run = _BRACKET_RUN.search(text)
    if run is not None:
        offset = run.end() - 1
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        raise _fail(file, line, column, f"nesting is deeper than {MAX_DEPTH} levels")
    return text


class _Builder:
    """Folds the event stream into JSON data, one open container per stack frame."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.source = SourceMap(file)
        # Each frame: (container, path, pending key or None, key position).
        self.stack: list[list[Any]] = []
        self.root: Any = None
        self.documents = 0

    def _place(self, event: Event, value: Any) -> Path:
        pos = _pos(event)
        if not self.stack:
            self.root = value
            path: Path = ()
        else:
            frame = self.stack[-1]
            container, parent = frame[0], frame[1]
            if isinstance(container, list):
                path = (*parent, len(container))
                container.append(value)
            else:
                key = frame[2]
                if key is None:
                    raise _fail(self.file, *pos, "mapping keys must be plain strings")
                path = (*parent, key)
                container[key] = value
                self.source.keys[path] = frame[3]
                frame[2] = None
        self.source.values[path] = pos
        return path

    def _key(self, event: ScalarEvent) -> None:
        frame = self.stack[-1]
        key: str = _double_quoted(event, self.file) if event.style == '"' else event.value
        if event.tag is not None and event.tag != _STR_TAG:
            raise _fail(self.file, *_pos(event), f"YAML tags are not allowed (found {event.tag})")
        if key in frame[0]:
            line, column = self.source.keys[(*frame[1], key)]
            raise _fail(
                self.file,
                *_pos(event),
                f"duplicate key {key!r} (first at line {line}, column {column})",
            )
        frame[2] = key
        frame[3] = _pos(event)

    def _expecting_key(self) -> bool:
        return (
            bool(self.stack) and isinstance(self.stack[-1][0], dict) and self.stack[-1][2] is None
        )

    def feed(self, event: Event) -> None:
        if getattr(event, "anchor", None) is not None or isinstance(event, AliasEvent):
            raise _fail(self.file, *_pos(event), "YAML anchors and aliases are not allowed")
        if isinstance(event, DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise _fail(self.file, *_pos(event), "only one YAML document is allowed per file")
        elif isinstance(event, ScalarEvent):
            if self._expecting_key():
                self._key(event)
            else:
                value = _scalar(event, self.file)
                path = self._place(event, value)
                if isinstance(value, str):
                    self.source.styles[path] = event.style
                if event.value == "" and event.style is None and path in self.source.keys:
                    # An empty value's mark is wherever the next token starts; its key is
                    # where the reader looks.
                    self.source.values[path] = self.source.keys[path]
        elif isinstance(event, MappingStartEvent | SequenceStartEvent):
            if self._expecting_key():
                raise _fail(self.file, *_pos(event), "mapping keys must be plain strings")
            if event.tag is not None:
                raise _fail(
                    self.file, *_pos(event), f"YAML tags are not allowed (found {event.tag})"
                )
            if len(self.stack) >= MAX_DEPTH:
                raise _fail(self.file, *_pos(event), f"nesting is deeper than {MAX_DEPTH} levels")
            container: dict[str, Any] | list[Any] = (
                {} if isinstance(event, MappingStartEvent) else []
            )
            path = self._place(event, container)
            self.stack.append([container, path, None, (0, 0)])
        elif isinstance(event, MappingEndEvent | SequenceEndEvent):
            self.stack.pop()


def load_document(source: str | bytes, file: str, *, max_bytes: int = MAX_BYTES) -> Loaded:
    """Parse one YAML or JSON document; raise FlowError with the first problem met."""
    text = _check_size_and_text(source, file, max_bytes)
    builder = _Builder(file)
    builder.source.lines = text.splitlines()
    try:
        for event in YAML(typ="safe", pure=True).parse(text):
            builder.feed(event)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        what = " ".join(p for p in (exc.context, exc.problem) if p)
        start = exc.context_mark
        if (
            start is not None
            and mark is not None
            and (start.line, start.column)
            != (
                mark.line,
                mark.column,
            )
        ):
            # The parser stops where it noticed; where the construct began is the useful hint.
            what += f" (the construct started at line {start.line + 1}, column {start.column + 1})"
        raise _fail(file, line, column, f"syntax error: {what}") from None
    except ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        message = f"character U+{exc.character:04X} is not allowed in YAML"
        raise _fail(file, line, column, message) from None
    except YAMLError as exc:
        raise _fail(file, 1, 1, f"syntax error: {exc}") from None
    except RecursionError:
        raise _fail(file, 1, 1, f"nesting is deeper than {MAX_DEPTH} levels") from None
    if builder.documents == 0:
        raise _fail(file, 1, 1, "the document is empty")
    return Loaded(builder.root, builder.source)
