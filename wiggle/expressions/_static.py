"""The profile's static rules, checked on the source text before any CEL library sees it.

CEL's lexical grammar is small (identifiers, numbers, quoted strings and bytes, punctuation), so
the rules that bound an expression's size and shape are checked here on tokens, the same way
whichever library evaluates the expression later: its length, how deeply it nests, which
functions it calls, and that no comprehension runs inside another one. Pure: no I/O, no CEL
library.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from wiggle.expressions._profile import (
    COMPREHENSIONS,
    FUNCTIONS,
    MAX_DEPTH,
    MAX_SOURCE_CHARS,
    NAMESPACED_FUNCTIONS,
)

__all__ = ["Problem", "Token", "check_source", "position", "tokens"]


@dataclass(frozen=True)
class Token:
    kind: str  # "ident" | "quoted" (a `backquoted` field name) | "number" | "string" | "punct"
    text: str
    offset: int  # in code points, from 0


@dataclass(frozen=True)
class Problem:
    """A rule the source breaks, at `offset` (code points from 0) into it."""

    offset: int
    message: str


class LexError(Exception):
    def __init__(self, offset: int, message: str) -> None:
        super().__init__(message)
        self.offset = offset
        self.message = message


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A field selected by a quoted name, `{'content-type': 'x'}.`content-type``: CEL's grammar allows
# letters, digits and _ . - / and space between the backquotes. Never a call or a function name.
_QUOTED = re.compile(r"`[A-Za-z0-9_./\- ]+`")
# A float has digits after its point (`42.size()` is a call on the int 42).
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+[uU]?|(?:[0-9]*\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?[uU]?")
_STRING_START = re.compile(r"(?:[rR][bB]?|[bB][rR]?)?(\"\"\"|'''|\"|')")
_PUNCT = ("&&", "||", "==", "!=", "<=", ">=", "?.", *"()[]{}.,:?!<>+-*/%")
_SPACE = re.compile(r"\s+|//[^\n]*")


def tokens(source: str) -> Iterator[Token]:
    """The tokens of `source`; LexError at the first character that starts none."""
    at = 0
    while at < len(source):
        space = _SPACE.match(source, at)
        if space:
            at = space.end()
            continue
        string = _STRING_START.match(source, at)
        if string:
            raw = "r" in string.group(0).lower()
            end = _string_end(source, at, string.end(), string.group(1), raw)
            yield Token("string", source[at:end], at)
            at = end
            continue
        for kind, pattern in (("ident", _IDENT), ("quoted", _QUOTED), ("number", _NUMBER)):
            found = pattern.match(source, at)
            if found:
                yield Token(kind, found.group(0), at)
                at = found.end()
                break
        else:
            punct = next((p for p in _PUNCT if source.startswith(p, at)), None)
            if punct is None:
                raise LexError(at, f"unexpected character {source[at]!r}")
            yield Token("punct", punct, at)
            at += len(punct)


def _string_end(source: str, start: int, at: int, quote: str, raw: bool) -> int:
    while at < len(source):
        if source.startswith(quote, at):
            return at + len(quote)
        if source[at] == "\\" and not raw:
            at += 2
            continue
        if source[at] == "\n" and len(quote) == 1:
            break
        at += 1
    raise LexError(start, "this string is never closed")


def check_source(source: str) -> list[Problem]:
    """Every static rule `source` breaks, in order of position (empty: it may go to CEL)."""
    if not source.strip():
        return [Problem(0, "the expression is empty")]
    if len(source) > MAX_SOURCE_CHARS:
        return [
            Problem(
                MAX_SOURCE_CHARS,
                f"the expression is {len(source)} characters long; at most {MAX_SOURCE_CHARS}",
            )
        ]
    try:
        toks = list(tokens(source))
    except LexError as exc:
        return [Problem(exc.offset, exc.message)]
    problems: list[Problem] = []
    # The open brackets, each noting whether it is the argument list of a comprehension macro.
    stack: list[bool] = []
    for i, tok in enumerate(toks):
        if tok.kind == "ident" and tok.text.startswith("__"):
            problems.append(
                Problem(
                    tok.offset, f"{tok.text}: names that begin with two underscores are reserved"
                )
            )
        if tok.kind == "punct" and tok.text in "([{":
            called = _called_name(toks, i)
            comprehension = tok.text == "(" and called in COMPREHENSIONS and _is_member(toks, i)
            if comprehension and any(stack):
                problems.append(
                    Problem(
                        toks[i - 1].offset,
                        f"{called}() inside another comprehension: the profile allows one level "
                        "of map/filter/all/exists/exists_one, so an expression's cost stays "
                        "linear in its input",
                    )
                )
            stack.append(comprehension)
            if len(stack) > MAX_DEPTH:
                problems.append(Problem(tok.offset, f"nested more than {MAX_DEPTH} levels deep"))
                return problems
            if called is not None and not comprehension:
                name = _qualified(toks, i, called)
                if name not in FUNCTIONS and name not in NAMESPACED_FUNCTIONS:
                    problems.append(
                        Problem(
                            toks[i - 1].offset,
                            f"{name}() is not a function of the Wiggle CEL profile "
                            "(docs/expressions.md lists them)",
                        )
                    )
        elif tok.kind == "punct" and tok.text in ")]}" and stack:
            stack.pop()
    return problems


def _called_name(toks: list[Token], i: int) -> str | None:
    """The identifier right before the `(` at `i` (None: not a call)."""
    if toks[i].text != "(" or i == 0 or toks[i - 1].kind != "ident":
        return None
    return toks[i - 1].text


def _is_member(toks: list[Token], i: int) -> bool:
    """Whether the call at `i` is `receiver.name(`."""
    return i >= 2 and toks[i - 2].text == "."


def _qualified(toks: list[Token], i: int, name: str) -> str:
    """`math.greatest` for `math.greatest(`; a member call's bare name otherwise."""
    if i >= 3 and toks[i - 2].text == "." and toks[i - 3].kind == "ident":
        dotted = f"{toks[i - 3].text}.{name}"
        before = toks[i - 4].text if i >= 4 else ""
        if dotted in NAMESPACED_FUNCTIONS and before != ".":
            return dotted
    return name


def position(source: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of code point `offset` in `source`."""
    offset = max(0, min(offset, len(source)))
    line = source.count("\n", 0, offset) + 1
    column = offset - (source.rfind("\n", 0, offset) + 1) + 1
    return line, column
