"""Regenerate the cel-spec subset (spec/conformance/expressions/cel-spec/) from a cel-spec checkout.

    python scripts/update_cel_spec_subset.py CEL_SPEC          # rewrite subset.json and the counts
    python scripts/update_cel_spec_subset.py CEL_SPEC --check  # exit 1 if either would change
    python scripts/update_cel_spec_subset.py CEL_SPEC --why    # also list each case left out

CEL_SPEC is a checkout of github.com/google/cel-spec (its work tree) or a git directory of one
(then the files are read at --rev, default HEAD). The script compiles cel-spec's own .proto files
with grpc_tools (a test dependency), parses every tests/simple/testdata/*.textproto with protobuf's
text_format, and keeps each case that lies inside the Wiggle CEL profile (docs/expressions.md):
the RULES below, checked in order, say why any other case is left out. A kept case is evaluated
through the public API of each evaluator (tests/unit/expressions/test_cel_spec.py,
sdk/go/expr/celspec_test.go). The README's block between the `generated` markers (the commit and
the counts per file and per rule) is rewritten too; its prose is written by hand.

How a case is carried over:
- bindings become the context: a variable `x` of the case is written `ctx.x` in the expression
  (the profile declares no other name) and its value, mapped to JSON, is `ctx`'s key `x`;
- a value is mapped to JSON as the profile maps a result (an integral double is an integer);
- any eval_error is `"error": true` (cel-spec's messages are not normative, and the profile sorts
  errors into its own kinds); a case with disable_check whose result is an error also carries
  `"check": false`: Wiggle type-checks every expression, so the failure may come when it is
  compiled as well as when it is evaluated.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    message_factory,
    text_format,
    timestamp_pb2,
)
from grpc_tools import protoc  # type: ignore[import-untyped]

from wiggle.expressions import profile

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "spec" / "conformance" / "expressions" / "cel-spec"
SUBSET = OUT / "subset.json"
README = OUT / "README.md"
BEGIN, END = "<!-- generated: begin -->", "<!-- generated: end -->"
TESTDATA = "tests/simple/testdata/"
REPOSITORY = "https://github.com/google/cel-spec"


# --- reading a cel-spec checkout ---------------------------------------------------------------


class Source:
    """The files of one cel-spec revision, from a work tree or a git directory."""

    def __init__(self, path: Path, rev: str) -> None:
        self.git_dir: Path | None = None
        if (path / "HEAD").is_file() and (path / "objects").is_dir():
            self.git_dir = path
        elif not (path / TESTDATA).is_dir():
            raise SystemExit(f"{path}: neither a cel-spec work tree nor a git directory")
        self.path = path
        self.rev = rev
        self.commit = self._commit()

    def _git(self, *args: str) -> bytes:
        where = ["--git-dir", str(self.git_dir)] if self.git_dir else ["-C", str(self.path)]
        return subprocess.run(["git", *where, *args], check=True, capture_output=True).stdout

    def _commit(self) -> str:
        try:
            return self._git("rev-parse", self.rev if self.git_dir else "HEAD").decode().strip()
        except (subprocess.CalledProcessError, FileNotFoundError):
            if self.git_dir:
                raise
            return "unknown (not a git checkout)"

    def names(self) -> list[str]:
        if self.git_dir:
            return self._git("ls-tree", "-r", "--name-only", self.rev).decode().splitlines()
        return sorted(
            str(p.relative_to(self.path)).replace("\\", "/")
            for p in self.path.rglob("*")
            if p.is_file() and ".git" not in p.parts
        )

    def read(self, name: str) -> bytes:
        if self.git_dir:
            return self._git("show", f"{self.rev}:{name}")
        return (self.path / name).read_bytes()


def simple_test_file_class(source: Source) -> tuple[Any, descriptor_pool.DescriptorPool]:
    """The SimpleTestFile message class, compiled from the checkout's own .proto files (with the
    conformance TestAllTypes messages, so that text_format can read the Any values that name
    them)."""
    protos = [
        n
        for n in source.names()
        if n.startswith("proto/cel/expr/") and n.endswith(".proto") and "/policy/" not in n
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "proto"
        for name in protos:
            target = Path(tmp) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read(name))
        out = Path(tmp) / "descriptors.pb"
        include = Path(protoc.__file__).parent / "_proto"
        relative = [n.removeprefix("proto/") for n in protos]
        args = ["protoc", f"-I{root}", f"-I{include}", "--include_imports"]
        if protoc.main([*args, f"--descriptor_set_out={out}", *relative]) != 0:
            raise SystemExit("protoc failed on cel-spec's .proto files")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    name = "cel.expr.conformance.test.SimpleTestFile"
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name)), pool


# --- the expression's tokens ----------------------------------------------------------------------


@dataclass(frozen=True)
class Tok:
    kind: str  # ident | quoted (a `backquoted` field name) | number | string | punct
    text: str
    start: int
    end: int


_SPACE = re.compile(r"\s+|//[^\n]*")
_STRING = re.compile(r"(?:[rR][bB]?|[bB][rR]?)?(\"\"\"|'''|\"|')")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUOTED = re.compile(r"`[^`]*`")
_NUMBER = re.compile(
    r"0[xX][0-9a-fA-F]+[uU]?|(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?[uU]?"
)
_PUNCT = ("&&", "||", "==", "!=", "<=", ">=", "?.", *"()[]{}.,:?!<>+-*/%")


class Unlexable(ValueError):
    pass


def lex(source: str) -> list[Tok]:
    """CEL's tokens, as far as the rules need them (whitespace and comments dropped)."""
    out: list[Tok] = []
    at = 0
    while at < len(source):
        space = _SPACE.match(source, at)
        if space:
            at = space.end()
            continue
        string = _STRING.match(source, at)
        if string:
            end = _string_end(source, string.end(), string.group(1), "r" in string.group(0).lower())
            out.append(Tok("string", source[at:end], at, end))
            at = end
            continue
        for kind, pattern in (("ident", _IDENT), ("quoted", _QUOTED), ("number", _NUMBER)):
            found = pattern.match(source, at)
            if found:
                out.append(Tok(kind, found.group(0), at, found.end()))
                at = found.end()
                break
        else:
            punct = next((p for p in _PUNCT if source.startswith(p, at)), None)
            if punct is None:
                raise Unlexable(f"unexpected character {source[at]!r}")
            out.append(Tok("punct", punct, at, at + len(punct)))
            at += len(punct)
    return out


def _string_end(source: str, at: int, quote: str, raw: bool) -> int:
    while at < len(source):
        if source.startswith(quote, at):
            return at + len(quote)
        at += 2 if source[at] == "\\" and not raw else 1
    raise Unlexable("a string is never closed")


def _closing(toks: list[Tok], i: int) -> int:
    """The index of the bracket that closes the one at `i`."""
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].kind == "punct" and toks[j].text in "([{":
            depth += 1
        elif toks[j].kind == "punct" and toks[j].text in ")]}":
            depth -= 1
            if depth == 0:
                return j
    return len(toks)


def _arguments(toks: list[Tok], i: int) -> list[list[Tok]]:
    """The arguments of the call whose `(` is at `i`, each as its tokens."""
    args: list[list[Tok]] = [[]]
    depth = 0
    for tok in toks[i + 1 : _closing(toks, i)]:
        if tok.kind == "punct" and tok.text in "([{":
            depth += 1
        elif tok.kind == "punct" and tok.text in ")]}":
            depth -= 1
        if depth == 0 and tok.kind == "punct" and tok.text == ",":
            args.append([])
        else:
            args[-1].append(tok)
    return [a for a in args if a]


_OPERAND_END = {"ident", "quoted", "number", "string"}
_KEYWORDS = {"true", "false", "null", "in"}


def _is_member(toks: list[Tok], i: int) -> bool:
    """Whether the token at `i` follows a `.` that follows an operand (`x.f`, `f().g`)."""
    if i < 2 or toks[i - 1].text != ".":
        return False
    before = toks[i - 2]
    return before.kind in _OPERAND_END or before.text in (")", "]", "}")


@dataclass
class Shape:
    """What the classification needs to know about an expression."""

    calls: list[str]  # every function called; a namespaced one dotted (`math.greatest`)
    macro_arity: list[tuple[str, int]]  # each comprehension macro and its number of arguments
    nested_comprehension: bool
    depth: int  # how deeply its brackets nest
    message_literal: bool  # `Name{...}`: a protobuf message is constructed
    leading_dot: bool  # `.name`: an absolute (container-qualified) name
    free: list[tuple[int, str]]  # (token index, name) of each name no macro binds
    has_of_free: set[str]  # free names used bare inside has(), which a rewrite would change


def shape(source: str, variables: set[str]) -> Shape:
    """The calls, macros, nesting and free names of `source`, whose free names `variables` are
    the case's bindings (`x.f(` is a member call on a variable, a namespaced `x.f` otherwise)."""
    toks = lex(source)
    calls: list[str] = []
    arity: list[tuple[str, int]] = []
    bound: list[tuple[str, int, int]] = []  # a macro's variable, from and to token index
    nested = message = leading = False
    depth = deepest = 0
    open_macros: list[int] = []  # the closing index of each comprehension we are inside

    def is_variable(i: int) -> bool:
        name = toks[i].text
        return name in variables or any(n == name and lo < i < hi for n, lo, hi in bound)

    for i, tok in enumerate(toks):
        while open_macros and i > open_macros[-1]:
            open_macros.pop()
        if tok.kind == "punct" and tok.text in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif tok.kind == "punct" and tok.text in ")]}":
            depth -= 1
        elif tok.kind == "punct" and tok.text == "." and not _is_member(toks, i + 1):
            leading = leading or (i + 1 < len(toks) and toks[i + 1].kind == "ident")
        if tok.kind != "punct" or tok.text not in "({" or i == 0 or toks[i - 1].kind != "ident":
            continue
        name = toks[i - 1].text
        if name in _KEYWORDS:
            continue  # `x in {...}`, `x in (...)`
        if tok.text == "{":
            message = True
            continue
        if _is_member(toks, i - 1) and name in profile.COMPREHENSIONS:
            args = _arguments(toks, i)
            arity.append((name, len(args)))
            nested = nested or bool(open_macros)
            close = _closing(toks, i)
            open_macros.append(close)
            two_variables = name != "map" and len(args) == 3
            for arg in args[: 2 if two_variables else 1]:
                if len(arg) == 1 and arg[0].kind == "ident":
                    bound.append((arg[0].text, i, close))
            continue
        namespaced = (
            i >= 3
            and toks[i - 2].text == "."
            and toks[i - 3].kind == "ident"
            and not _is_member(toks, i - 3)
            and not is_variable(i - 3)
        )
        calls.append(f"{toks[i - 3].text}.{name}" if namespaced else name)
    free: list[tuple[int, str]] = []
    has_of_free: set[str] = set()
    for i, tok in enumerate(toks):
        if tok.kind != "ident" or tok.text in _KEYWORDS or _is_member(toks, i):
            continue
        if i + 1 < len(toks) and toks[i + 1].text in ("(", "{"):
            continue  # a function (checked by name) or a message type
        namespace = i + 3 < len(toks) and toks[i + 1].text == "." and toks[i + 3].text == "("
        if namespace and f"{tok.text}.{toks[i + 2].text}" in calls:
            continue  # the namespace of math.greatest(...)
        if any(n == tok.text and lo < i < hi for n, lo, hi in bound):
            continue
        if i >= 1 and toks[i - 1].text == ".":
            continue  # `.name`, reported as leading_dot
        free.append((i, tok.text))
        if i >= 2 and toks[i - 1].text == "(" and toks[i - 2].text == "has":
            has_of_free.add(tok.text)
    return Shape(calls, arity, nested, deepest, message, leading, free, has_of_free)


def rewrite(source: str, names: set[str]) -> str:
    """`source` with each free reference to one of `names` written `ctx.<name>`."""
    toks = lex(source)
    out, at = [], 0
    for i, name in shape(source, names).free:
        if name in names:
            out.append(source[at : toks[i].start] + "ctx." + name)
            at = toks[i].end
    return "".join(out) + source[at:]


# --- values -------------------------------------------------------------------------------------


class Outside(Exception):
    """A case outside the profile; `rule` names why (a key of RULES)."""

    def __init__(self, rule: str, detail: str = "") -> None:
        super().__init__(rule)
        self.rule = rule
        self.detail = detail


def to_json(value: Any, *, binding: bool = False) -> Any:
    """The JSON form under the profile of a cel.expr.Value: of a result, or (`binding`) of a
    variable's value, which must also read back as the same CEL value."""
    kind = value.WhichOneof("kind")
    no_json = "binding_not_json" if binding else "result_not_json"
    if kind == "null_value":
        return None
    if kind == "bool_value":
        return value.bool_value
    if kind == "string_value":
        return value.string_value
    if kind == "int64_value":
        if abs(value.int64_value) > profile.MAX_SAFE_INTEGER:
            raise Outside(no_json, "an int outside ±(2^53 - 1)")
        return value.int64_value
    if kind == "uint64_value":
        raise Outside("binding_not_json" if binding else "uint_result", "a uint")
    if kind == "double_value":
        d = value.double_value
        if math.isnan(d) or math.isinf(d):
            raise Outside(no_json, "NaN or an infinity")
        if d.is_integer() and abs(d) <= profile.MAX_SAFE_INTEGER:
            if binding:
                raise Outside("integral_double_binding")
            return int(d)
        return d
    if kind == "list_value":
        return [to_json(v, binding=binding) for v in value.list_value.values]
    if kind == "map_value":
        out = {}
        for entry in value.map_value.entries:
            if entry.key.WhichOneof("kind") != "string_value":
                raise Outside(no_json, "a map with a non-string key")
            out[entry.key.string_value] = to_json(entry.value, binding=binding)
        return out
    if kind == "object_value":
        if binding:
            raise Outside("message", value.object_value.type_url.rsplit("/", 1)[-1])
        return _well_known(value.object_value)
    raise Outside(no_json, kind or "no value")


def _well_known(any_value: Any) -> str:
    """A google.protobuf.Timestamp or Duration result, as the profile writes it."""
    name = any_value.type_url.rsplit("/", 1)[-1]
    if name == "google.protobuf.Timestamp":
        ts = timestamp_pb2.Timestamp.FromString(any_value.value)
        if ts.nanos % 1000:
            raise Outside("finer_than_microseconds")
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
        moment = epoch + datetime.timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S")
        if moment.microsecond:
            text += f".{moment.microsecond:06d}".rstrip("0")
        return text + "Z"
    if name == "google.protobuf.Duration":
        d = duration_pb2.Duration.FromString(any_value.value)
        if d.nanos % 1000:
            raise Outside("finer_than_microseconds")
        micros = d.seconds * 1_000_000 + d.nanos // 1000
        whole, frac = divmod(abs(micros), 1_000_000)
        text = ("-" if micros < 0 else "") + str(whole)
        if frac:
            text += f".{frac:06d}".rstrip("0")
        return text + "s"
    raise Outside("message", name)


# --- the rules ----------------------------------------------------------------------------------

#: Why a case is left out, checked in this order; the README explains each at length.
RULES: dict[str, str] = {
    "check_only": "checks only the deduced type; nothing is evaluated",
    "disable_macros": "parses with macros disabled; the profile always has them",
    "unknown": "expects an unknown result; the profile has no unknowns",
    "container": "sets a container for name resolution; the profile has none",
    "unlexable": "is not CEL the profile's tokens cover",
    "dotted_binding": "binds a qualified name (`a.b.c`); only `ctx` and `instance` exist",
    "binding_not_json": "binds a value with no JSON form (a uint, bytes, an enum)",
    "integral_double_binding": (
        "binds an integral double, which JSON cannot tell from an int: the profile reads it as "
        "an int"
    ),
    "message": "constructs a protobuf message, binds one to a variable or gives one",
    "leading_dot": "uses an absolute `.name`, which only a container gives meaning",
    "function": "calls a function the profile does not allow",
    "two_variable_macro": (
        "uses a two-variable comprehension (`all(i, v, ...)`), an extension the profile leaves out"
    ),
    "nested_comprehension": "runs a comprehension inside another's arguments",
    "too_deep": f"nests brackets more than {profile.MAX_DEPTH} deep",
    "too_long": f"is longer than {profile.MAX_SOURCE_CHARS} characters",
    "undeclared_name": (
        "expects a value but names an identifier the profile does not declare (a type name such "
        "as `int`, an unbound variable)"
    ),
    "has_of_variable": "tests has() of a bare variable, which the rewrite to ctx would change",
    "disabled_check_value": (
        "disables the type checker and expects a value; the profile checks every expression"
    ),
    "uint_result": "gives a uint; the profile's result table has no uint",
    "result_not_json": "gives a result with no JSON form (not_json under the profile)",
    "finer_than_microseconds": (
        "gives a timestamp or duration finer than microseconds, which the profile cuts"
    ),
}


def classify(test: Any) -> dict[str, Any]:
    """The subset's case for one cel-spec SimpleTest (without file, section and id); Outside
    with the first rule it breaks."""
    if test.check_only:
        raise Outside("check_only")
    if test.disable_macros:
        raise Outside("disable_macros")
    matcher = test.WhichOneof("result_matcher")
    if matcher in ("unknown", "any_unknowns"):
        raise Outside("unknown")
    if test.container:
        raise Outside("container")
    names = set(test.bindings)
    try:
        found = shape(test.expr, names)
    except Unlexable as exc:
        raise Outside("unlexable", str(exc)) from None
    if any("." in n for n in names) or any("." in d.name for d in test.type_env):
        raise Outside("dotted_binding")
    bindings = {n: _binding(test.bindings[n]) for n in sorted(names)}
    if found.message_literal or any(
        d.WhichOneof("decl_kind") == "ident" and _is_message(d) for d in test.type_env
    ):
        raise Outside("message")
    if found.leading_dot:
        raise Outside("leading_dot")
    allowed = profile.FUNCTIONS | profile.NAMESPACED_FUNCTIONS
    refused = [c for c in found.calls if c not in allowed]
    if refused:
        raise Outside("function", ", ".join(sorted(set(refused))))
    if any(n in ("all", "exists", "exists_one") and k == 3 for n, k in found.macro_arity):
        raise Outside("two_variable_macro")
    if found.nested_comprehension:
        raise Outside("nested_comprehension")
    if found.depth > profile.MAX_DEPTH:
        raise Outside("too_deep")
    error = matcher in ("eval_error", "any_eval_errors")
    undeclared = {n for _, n in found.free if n not in names}
    if undeclared and not error:
        raise Outside("undeclared_name", ", ".join(sorted(undeclared)))
    if found.has_of_free & names:
        raise Outside("has_of_variable")
    if test.disable_check and not error:
        raise Outside("disabled_check_value")
    expr = rewrite(test.expr, names)
    if len(expr) > profile.MAX_SOURCE_CHARS:
        raise Outside("too_long")
    case: dict[str, Any] = {"expr": expr}
    if expr != test.expr:
        case["cel_expr"] = test.expr
    case["bindings"] = bindings
    if error:
        case["error"] = True
        if test.disable_check:
            case["check"] = False
    elif matcher is None:
        case["value"] = True  # simple.proto: no matcher is a matcher for true
    elif matcher == "typed_result":
        case["value"] = to_json(test.typed_result.result)
    else:
        case["value"] = to_json(test.value)
    return case


def _binding(expr_value: Any) -> Any:
    if expr_value.WhichOneof("kind") != "value":
        raise Outside("binding_not_json", "an error or unknown binding")
    return to_json(expr_value.value, binding=True)


def _is_message(decl: Any) -> bool:
    t = decl.ident.type
    return t.WhichOneof("type_kind") in ("message_type", "well_known", "wrapper", "abstract_type")


# --- the whole corpus ---------------------------------------------------------------------------


@dataclass
class Tally:
    kept: Counter[str]
    excluded: Counter[tuple[str, str]]  # (file, rule)
    sections: dict[str, dict[str, Counter[str]]]  # file -> section -> "kept" / rule
    why: list[tuple[str, str, str]]  # (case id, rule, detail) of each case left out


def build(source: Source) -> tuple[list[dict[str, Any]], Tally]:
    cls, pool = simple_test_file_class(source)
    files = sorted(n for n in source.names() if n.startswith(TESTDATA) and n.endswith(".textproto"))
    cases: list[dict[str, Any]] = []
    tally = Tally(Counter(), Counter(), {}, [])
    for name in files:
        stem = Path(name).stem
        message = cls()
        text_format.Parse(source.read(name).decode(), message, descriptor_pool=pool)
        tally.sections[stem] = {}
        seen: Counter[str] = Counter()
        for section in message.section:
            per = tally.sections[stem].setdefault(section.name, Counter())
            for test in section.test:
                key = f"{stem}/{section.name}/{test.name}"
                seen[key] += 1
                if seen[key] > 1:
                    key += f"#{seen[key]}"
                try:
                    case = classify(test)
                except Outside as out:
                    tally.excluded[stem, out.rule] += 1
                    per[out.rule] += 1
                    tally.why.append((key, out.rule, out.detail))
                    continue
                tally.kept[stem] += 1
                per["kept"] += 1
                cases.append(
                    {"id": key, "file": stem, "section": section.name, "name": test.name, **case}
                )
    return cases, tally


def subset_text(source: Source, cases: list[dict[str, Any]]) -> str:
    doc = {
        "cel_spec": {
            "repository": REPOSITORY,
            "commit": source.commit,
            "license": "Apache-2.0",
            "notice": (
                f"Derived from cel-spec's {TESTDATA}*.textproto (Apache License 2.0, the CEL "
                "authors): cases selected, their variables rewritten to ctx and their values to "
                "JSON by scripts/update_cel_spec_subset.py; see "
                "spec/conformance/expressions/cel-spec/README.md."
            ),
        },
        "cases": cases,
    }
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def readme_block(source: Source, cases: list[dict[str, Any]], tally: Tally) -> str:
    rows = [
        "| file | kept | excluded | why excluded (rule: count) |",
        "|---|---:|---:|---|",
    ]
    kept_total = excluded_total = 0
    for stem in sorted(tally.sections):
        rules = {r: n for (f, r), n in tally.excluded.items() if f == stem}
        excluded = sum(rules.values())
        kept_total += tally.kept[stem]
        excluded_total += excluded
        why = ", ".join(f"{r}: {n}" for r, n in sorted(rules.items(), key=lambda x: -x[1]))
        rows.append(f"| {stem} | {tally.kept[stem]} | {excluded} | {why or '—'} |")
    rows.append(f"| **all** | **{kept_total}** | **{excluded_total}** | |")
    errors = sum(1 for c in cases if c.get("error"))
    unchecked = sum(1 for c in cases if c.get("check") is False)
    by_rule: Counter[str] = Counter()
    for (_, rule), n in tally.excluded.items():
        by_rule[rule] += n
    rule_rows = ["| rule | cases | a case is left out when it |", "|---|---:|---|"]
    rule_rows += [f"| `{r}` | {by_rule[r]} | {why} |" for r, why in RULES.items()]
    section_lines = []
    for stem in sorted(tally.sections):
        parts = []
        for section, counts in tally.sections[stem].items():
            kept = counts.get("kept", 0)
            total = sum(counts.values())
            out = [f"{r} {n}" for r, n in counts.items() if r != "kept"]
            parts.append(f"`{section}` {kept}/{total}" + (f" ({', '.join(out)})" if out else ""))
        section_lines.append(f"- **{stem}**: " + "; ".join(parts))
    return "\n".join(
        [
            BEGIN,
            f"Taken from [{REPOSITORY}]({REPOSITORY}) at commit `{source.commit}`, "
            f"`{TESTDATA}*.textproto`.",
            "",
            f"{kept_total} cases kept ({kept_total - errors} values, {errors} errors, "
            f"{unchecked} of them with the checker disabled in cel-spec), "
            f"{excluded_total} left out.",
            "",
            *rows,
            "",
            "The rules, in the order they are applied (a case is counted under the first it "
            "breaks):",
            "",
            *rule_rows,
            "",
            "Per section (kept/total, then what left the others out):",
            "",
            *section_lines,
            END,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cel_spec", type=Path, help="a cel-spec work tree or git directory")
    parser.add_argument("--rev", default="HEAD", help="the revision of a git directory")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    parser.add_argument("--why", action="store_true", help="list each case left out, and why")
    args = parser.parse_args(argv)
    source = Source(args.cel_spec.resolve(), args.rev)
    cases, tally = build(source)
    if args.why:
        for key, rule, detail in tally.why:
            print(f"{key}\t{rule}" + (f"\t{detail}" if detail else ""))
    readme = README.read_text() if README.exists() else f"{BEGIN}\n{END}\n"
    if BEGIN not in readme or END not in readme:
        raise SystemExit(f"{README}: the generated block's markers are missing")
    head, rest = readme.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    outputs = {
        SUBSET: subset_text(source, cases),
        README: head + readme_block(source, cases, tally) + tail,
    }
    changed = [p for p, text in outputs.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for p in changed:
            print(f"{p.relative_to(ROOT)} would change", file=sys.stderr)
        return 1 if changed else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for p in changed:
        p.write_text(outputs[p])
        print(f"wrote {p.relative_to(ROOT)}")
    print(f"{len(cases)} cases kept, {sum(tally.excluded.values())} left out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
