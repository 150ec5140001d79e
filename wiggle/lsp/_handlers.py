"""Where a worker's source registers its activities, in each SDK's own form.

    Python      @activity, @activity("name"), @registry.activity(...), registry.register(fn, "name")
    Go          w.Register("name", fn), w.RegisterPredicate("name", fn)
    Java        .register("name", ...), .registerPredicate("name", ...)
    TypeScript  .activity("name", fn), .predicate("name", fn),
                new Worker({activities: {name: fn}, predicates: {name: fn}})

Each scanner takes a file's text and returns its registrations, never raising: a file that does
not parse (a Python file mid-edit) is read by a plainer pattern, or yields nothing. Names built
at run time (a loop over a map of names) cannot be seen and are not reported.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["LANGUAGES", "Registration", "language_of", "scan"]


@dataclass(frozen=True)
class Registration:
    """One activity registered: its name where it is written and the function that runs it
    (the registration itself when the function is written inline). Lines and columns are
    1-based, columns in characters."""

    name: str
    kind: str  # "activity", or "predicate" where the SDK (or a `-> bool`) says so
    language: str
    line: int
    column: int
    end: int  # past the name as written (quotes included)
    target_line: int
    target_column: int


#: File suffix -> language.
LANGUAGES = {
    ".py": "python",
    ".go": "go",
    ".java": "java",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".js": "typescript",
    ".mjs": "typescript",
    ".cjs": "typescript",
}
#: What a file must contain to be worth scanning at all.
_HINTS = {
    "python": ("@", ".register("),
    "go": ("Register",),
    "java": (".register",),
    "typescript": (".activity", ".predicate", "activities", "predicates"),
}


def language_of(path: str) -> str | None:
    if path.endswith(".d.ts"):
        return None
    dot = path.rfind(".")
    return LANGUAGES.get(path[dot:]) if dot >= 0 else None


def scan(language: str, text: str) -> list[Registration]:
    """The registrations in `text`, a source file of `language`."""
    if not any(hint in text for hint in _HINTS.get(language, ())):
        return []
    try:
        return list(_SCANNERS[language](text))
    except (RecursionError, MemoryError, ValueError):
        return []


# -- positions ---------------------------------------------------------------------------------


class _Offsets:
    """1-based (line, column) of character offsets in a text."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def at(self, offset: int) -> tuple[int, int]:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self.starts[lo] + 1


def _masked(text: str, quotes: str) -> str:
    """`text` with every comment (// and /* */) blanked out, strings and offsets kept."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in quotes:
            j = i + 1
            while j < n and text[j] != c and (c == "`" or text[j] != "\n"):
                j += 2 if text[j] == "\\" and c != "`" else 1
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = [ch if ch == "\n" else " " for ch in text[i:j]]
            i = j
        else:
            i += 1
    return "".join(out)


def _literal(token: str) -> str | None:
    """The value of a string literal token ("...", '...' or `...`), if it is a plain one."""
    if len(token) < 2:
        return None
    body = token[1:-1]
    if token[0] == "`":
        return None if "${" in body else body
    if "\\" not in body:
        return body
    try:
        value = json.loads('"' + body.replace('"', '\\"').replace("\\'", "'") + '"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


# -- C-like languages ----------------------------------------------------------------------------

_STRING = r"(\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)"
_GO = re.compile(r"\.\s*(Register|RegisterPredicate)\s*\(\s*" + _STRING + r"\s*,\s*([\w.]+)?")
_JAVA = re.compile(
    r"\.\s*(register|registerPredicate)\s*\(\s*" + _STRING + r"\s*,\s*([\w.]+::\w+|\w+)?"
)
_TS_CALL = re.compile(r"\.\s*(activity|predicate)\s*\(\s*" + _STRING + r"\s*,\s*([\w$.]+)?")
_TS_OPTIONS = re.compile(r"\b(activities|predicates)\s*:\s*\{")


def _definition(language: str, text: str, name: str) -> int | None:
    """Offset of the declaration of function `name` in `text`, if it is declared there."""
    n = re.escape(name)
    patterns = {
        "go": rf"\bfunc\s+(?:\([^)]*\)\s*)?({n})\s*\(",
        "java": rf"\b({n})\s*\([^;{{)]*\)\s*(?:throws\s[\w.,\s]+)?\{{",
        "typescript": rf"\bfunction\s*\*?\s*({n})\b|\b(?:const|let|var)\s+({n})\s*[=:]"
        rf"|^\s*(?:async\s+)?({n})\s*\([^)]*\)\s*(?::[^{{]+)?\{{",
    }
    found = re.search(patterns[language], text, re.M)
    if found is None:
        return None
    return next(found.start(g) for g in range(1, (found.lastindex or 1) + 1) if found.group(g))


def _registration(
    language: str,
    text: str,
    where: _Offsets,
    token: re.Match[str],
    group: int,
    kind: str,
    handler: str | None,
) -> Registration | None:
    name = _literal(token.group(group))
    if not name:
        return None
    line, column = where.at(token.start(group))
    target = None
    if handler:
        target = _definition(language, text, re.split(r"::|\.", handler)[-1])
    target_line, target_column = where.at(target) if target is not None else (line, column)
    end = column + len(token.group(group))
    return Registration(name, kind, language, line, column, end, target_line, target_column)


_Scanner = Callable[[str], Iterator[Registration]]


def _scan_calls(language: str, pattern: re.Pattern[str], predicate: str) -> _Scanner:
    def scan_text(text: str) -> Iterator[Registration]:
        masked = _masked(text, "\"'`" if language != "java" else "\"'")
        where = _Offsets(text)
        for token in pattern.finditer(masked):
            kind = "predicate" if token.group(1) == predicate else "activity"
            found = _registration(language, text, where, token, 2, kind, token.group(3))
            if found is not None:
                yield found
        if language == "typescript":
            yield from _ts_options(text, masked, where)

    return scan_text


_TS_KEY = re.compile(
    r"\s*(?:\"((?:[^\"\\\n]|\\.)*)\"|'((?:[^'\\\n]|\\.)*)'|([A-Za-z_$][\w$]*))\s*(?=[:,}(])"
)


def _ts_options(text: str, masked: str, where: _Offsets) -> Iterator[Registration]:
    """The keys of `activities: {...}` and `predicates: {...}` in a Worker's options."""
    for found in _TS_OPTIONS.finditer(masked):
        kind = "predicate" if found.group(1) == "predicates" else "activity"
        depth, i = 0, found.end()
        expect_key = True
        while i < len(masked):
            c = masked[i]
            if depth == 0 and expect_key:
                key = _TS_KEY.match(masked, i)
                if key is not None:
                    group = next(g for g in (1, 2, 3) if key.group(g) is not None)
                    start = key.start(group) - (1 if group < 3 else 0)
                    token = masked[start : key.end(group) + (1 if group < 3 else 0)]
                    name = key.group(3) or _literal(token)
                    if name:
                        line, column = where.at(start)
                        value = re.match(r"\s*:\s*([\w$]+)\s*[,}]", masked[key.end() :])
                        target = _definition("typescript", text, value.group(1)) if value else None
                        target_line, target_column = (
                            where.at(target) if target is not None else (line, column)
                        )
                        yield Registration(
                            name,
                            kind,
                            "typescript",
                            line,
                            column,
                            column + len(token),
                            target_line,
                            target_column,
                        )
                    i = key.end()
                expect_key = False
                continue
            if c in "{[(":
                depth += 1
            elif c in "}])":
                if depth == 0:
                    break
                depth -= 1
            elif c in "\"'`":
                end = re.match(_STRING, masked[i:])
                i += len(end.group(0)) if end else 1
                continue
            elif c == "," and depth == 0:
                expect_key = True
            i += 1


# -- Python ------------------------------------------------------------------------------------


def _is_activity(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Name):
        return target.id == "activity"
    return isinstance(target, ast.Attribute) and target.attr == "activity"


def _python_kind(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    returns = fn.returns
    return "predicate" if isinstance(returns, ast.Name) and returns.id == "bool" else "activity"


class _PythonLines:
    """ast's columns are UTF-8 byte offsets; editors count characters."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def column(self, line: int, byte_offset: int) -> int:
        if not 1 <= line <= len(self.lines):
            return 1
        raw = self.lines[line - 1].encode("utf-8", "surrogatepass")
        return len(raw[:byte_offset].decode("utf-8", "replace")) + 1

    def name_column(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
        text = self.lines[fn.lineno - 1] if fn.lineno <= len(self.lines) else ""
        found = re.search(rf"\bdef\s+({re.escape(fn.name)})\b", text)
        return found.start(1) + 1 if found else self.column(fn.lineno, fn.col_offset)


_PY_WORTH = re.compile(r"@[\w.]*\bactivity\b|\.register\(")


def _scan_python(text: str) -> Iterator[Registration]:
    if _PY_WORTH.search(text) is None:
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        yield from _scan_python_text(text)
        return
    lines = _PythonLines(text)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    calls: list[ast.Call] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.setdefault(node.name, node)
            for decorator in node.decorator_list:
                if _is_activity(decorator):
                    yield _decorated(node, decorator, lines)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "register"
        ):
            calls.append(node)
    for call in calls:
        found = _registered(call, functions, lines)
        if found is not None:
            yield found


def _decorated(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, decorator: ast.expr, lines: _PythonLines
) -> Registration:
    target_line, target_column = fn.lineno, lines.name_column(fn)
    named = isinstance(decorator, ast.Call) and decorator.args
    first = decorator.args[0] if isinstance(decorator, ast.Call) and named else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value:
        column = lines.column(first.lineno, first.col_offset)
        end = lines.column(first.lineno, first.end_col_offset or first.col_offset)
        return Registration(
            first.value,
            _python_kind(fn),
            "python",
            first.lineno,
            column,
            end,
            target_line,
            target_column,
        )
    end = target_column + len(fn.name)
    return Registration(
        fn.name,
        _python_kind(fn),
        "python",
        target_line,
        target_column,
        end,
        target_line,
        target_column,
    )


def _registered(
    call: ast.Call,
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    lines: _PythonLines,
) -> Registration | None:
    """`registry.register(fn, "name")` (or `name="name"`), or `registry.register(fn)`."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr != "register" or not call.args:
        return None
    handler = call.args[0]
    named: ast.expr | None = call.args[1] if len(call.args) > 1 else None
    for keyword in call.keywords:
        if keyword.arg == "name":
            named = keyword.value
    fn_name = handler.id if isinstance(handler, ast.Name) else None
    fn = functions.get(fn_name) if fn_name else None
    if isinstance(named, ast.Constant) and isinstance(named.value, str) and named.value:
        at: ast.expr = named
        name = named.value
    elif named is None and fn_name and "registr" in ast.unparse(func.value).lower():
        at, name = handler, fn_name
    else:
        return None
    column = lines.column(at.lineno, at.col_offset)
    end = lines.column(at.lineno, at.end_col_offset or at.col_offset)
    target = (fn.lineno, lines.name_column(fn)) if fn is not None else (at.lineno, column)
    kind = _python_kind(fn) if fn is not None else "activity"
    return Registration(name, kind, "python", at.lineno, column, end, *target)


_PY_DECORATED = re.compile(
    r"^[ \t]*@(?:[\w.]+\.)?activity(?:\(\s*(?:(['\"])([^'\"\n]+)\1)?\s*\))?[ \t]*\n"
    r"(?:[ \t]*@.*\n)*[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)",
    re.M,
)


def _scan_python_text(text: str) -> Iterator[Registration]:
    """A Python file that does not parse (mid-edit): its decorated functions, by pattern."""
    where = _Offsets(text)
    for found in _PY_DECORATED.finditer(text):
        group = 2 if found.group(2) else 3
        line, column = where.at(found.start(group))
        target_line, target_column = where.at(found.start(3))
        end = column + len(found.group(group)) + (1 if group == 2 else 0)
        column -= 1 if group == 2 else 0
        yield Registration(
            found.group(group),
            "activity",
            "python",
            line,
            column,
            end,
            target_line,
            target_column,
        )


_SCANNERS: dict[str, _Scanner] = {
    "python": _scan_python,
    "go": _scan_calls("go", _GO, "RegisterPredicate"),
    "java": _scan_calls("java", _JAVA, "registerPredicate"),
    "typescript": _scan_calls("typescript", _TS_CALL, "predicate"),
}
