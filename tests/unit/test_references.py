"""Every pointer the code and the docs give a reader leads somewhere.

- `docs/NAME.md` names a file that exists; `docs/NAME.md#anchor` and `docs/NAME.md, "Section"`
  name a heading of it (a heading that starts with the cited words: "Leases" finds "Leases and
  heartbeats").
- A Markdown link to a file of the repository, `[text](../docs/graph.md#anchor)`, leads to that
  file and heading.
- "see X" in a source file, where X is a name (`_wakeups`, `_reports.lock_token`,
  `Engine._run_reports`, `wait_for_tasks`, `EagerSlot`, `faultkit.py`, `docs/security.md`),
  names a module, file or definition that exists: a module or file beside the citing one, or a
  definition in it, its package or the proto.

Comment leaders (`#`, `//`, `*`) are dropped where a reference wraps onto the next line.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = {".py", ".md", ".go", ".java", ".sh", ".toml", ".proto", ".yaml", ".xml"}
#: Generated code quotes the .proto's comments (the .proto itself is checked); this file quotes
#: broken references on purpose.
SKIPPED = ("wiggle/_proto/", "sdk/go/wigglepb/", "tests/unit/test_references.py")

_WRAP = re.compile(r"\n[ \t]*(?:#|//|\*)?[ \t]*")
_DOC_SECTION = re.compile(r"(?<![\w/.])(?:\.\./)*(docs/[\w.-]+\.md),\s+\"([^\"]+)\"")
_DOC_ANCHOR = re.compile(r"(?<![\w/.])(?:\.\./)*(docs/[\w.-]+\.md)#([\w-]+)")
_DOC_FILE = re.compile(r"(?<![\w/.])(?:\.\./)*docs/([\w-]+)(?:\.md)?(?![\w/-])")
_MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
_SEE = re.compile(r"\b[Ss]ee (?:also )?`?([A-Za-z_][\w.]*[\w]|docs/[\w.-]+)`?")


def _tracked() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [
        ROOT / f
        for f in out
        if Path(f).suffix in SUFFIXES and not f.startswith(SKIPPED) and (ROOT / f).is_file()
    ]


@cache
def _headings(doc: Path) -> tuple[str, ...]:
    lines = doc.read_text().splitlines()
    titles: list[str] = []
    fenced = False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} +(.*?)\s*$", line)):
            titles.append(m.group(1))
    return tuple(titles)


def _plain(title: str) -> str:
    return re.sub(r"\s+", " ", title.replace("`", "")).strip().lower()


def _slug(title: str) -> str:
    """GitHub's anchor of a heading."""
    text = title.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _has_section(doc: Path, cited: str) -> bool:
    want = _plain(cited)
    return any(t == want or t.startswith(want + " ") for t in (_plain(h) for h in _headings(doc)))


def _has_anchor(doc: Path, anchor: str) -> bool:
    return anchor in {_slug(h) for h in _headings(doc)}


@cache
def _text(path: Path) -> str:
    return _WRAP.sub(" ", path.read_text())


@cache
def _proto_names() -> frozenset[str]:
    proto = (ROOT / "spec/proto/wiggle/v1/wiggle.proto").read_text()
    return frozenset(re.findall(r"\b\w+\b", proto))


def _defines(path: Path, name: str) -> bool:
    """Whether `path` defines `name`: a def, class, type, func, field, constant or table."""
    if not path.is_file():
        return False
    text = path.read_text()
    n = re.escape(name)
    patterns = (
        rf"\b(?:def|class|type|func|interface|record|enum)\s+(?:\([^)]*\)\s*)?{n}\b",
        rf"^\s*{n}\s*[:=]",  # an assignment or a dataclass field
        rf"\b(?:Table|table)\(\s*[\"']{n}[\"']",  # a SQLAlchemy table of that name
        rf"\b(?:public|private|protected|static|final|void|[\w<>\[\]]+)\s+{n}\s*\(",  # Java
    )
    return any(re.search(p, text, re.MULTILINE) for p in patterns)


def _see_resolves(source: Path, target: str) -> bool:
    here = source.parent
    if target.startswith("docs/"):
        return (ROOT / (target if target.endswith(".md") else target + ".md")).is_file()
    if (here / target).is_file():  # a file beside the citing one
        return True
    parts = target.split(".")
    if parts[0] == "wiggle":  # a dotted module path, or a module's member
        if (ROOT / "/".join(parts)).with_suffix(".py").is_file() or (
            ROOT / "/".join(parts) / "__init__.py"
        ).is_file():
            return True
        return _defines((ROOT / "/".join(parts[:-1])).with_suffix(".py"), parts[-1])
    head, rest = parts[0], parts[1:]
    module = here / f"{head}.py"
    if module.is_file():  # `_reports` or `_reports.lock_token`
        return all(_defines(module, name) for name in rest[:1])
    siblings = [p for p in here.iterdir() if p.suffix == source.suffix]
    if rest:  # `Engine._run_reports`: a class of this package and its member
        return any(_defines(p, head) and _defines(p, rest[0]) for p in siblings)
    return (
        _defines(source, head) or any(_defines(p, head) for p in siblings) or head in _proto_names()
    )


def _is_name(target: str) -> bool:
    """Whether "see X" is a reference rather than prose ("see the module docstring")."""
    return (
        target.startswith("docs/")
        or "_" in target
        or "." in target.strip(".")
        or bool(re.fullmatch(r"[A-Z][a-z]+[A-Z]\w*", target))  # CamelCase
    )


def _problems(paths: list[Path]) -> Iterator[str]:
    for path in paths:
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        text = _text(path)
        for m in _DOC_SECTION.finditer(text):
            doc, section = ROOT / m.group(1), m.group(2)
            if not doc.is_file():
                yield f"{where}: {m.group(1)} does not exist"
            elif not _has_section(doc, section):
                yield f'{where}: {m.group(1)} has no section "{section}"'
        for m in _DOC_ANCHOR.finditer(text):
            doc = ROOT / m.group(1)
            if doc.is_file() and not _has_anchor(doc, m.group(2)):
                yield f"{where}: {m.group(1)} has no heading #{m.group(2)}"
        for m in _DOC_FILE.finditer(text):
            if not (ROOT / f"docs/{m.group(1)}.md").is_file():
                yield f"{where}: docs/{m.group(1)}.md does not exist"
        if path.suffix == ".md":
            yield from _link_problems(path, where, text)
        else:
            for m in _SEE.finditer(text):
                target = m.group(1).rstrip(".")
                if _is_name(target) and not _see_resolves(path, target):
                    yield f'{where}: "see {target}" names nothing that exists'


def _link_problems(path: Path, where: Path, text: str) -> Iterator[str]:
    for m in _MD_LINK.finditer(text):
        link = m.group(1)
        if re.match(r"[a-z]+:", link) or link.startswith("<"):
            continue  # a URL
        file, _, anchor = link.partition("#")
        target = (path.parent / file).resolve() if file else path
        if not target.exists():
            yield f"{where}: link to {link}: no such file"
        elif anchor and target.suffix == ".md" and not _has_anchor(target, anchor):
            yield f"{where}: link to {link}: no such heading"


def test_every_reference_resolves() -> None:
    assert list(_problems(_tracked())) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('# (docs/internals.md, "No Such Section")', 'has no section "No Such Section"'),
        ("# docs/nowhere.md", "docs/nowhere.md does not exist"),
        ("# docs/internals.md#no-such-anchor", "has no heading #no-such-anchor"),
        ("# see _no_such_module", '"see _no_such_module" names nothing'),
        ("# see wiggle.engine.store.db.no_such_name", "names nothing"),
    ],
)
def test_a_broken_reference_is_found(tmp_path: Path, text: str, problem: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(text + "\n")
    found = list(_problems([probe]))
    assert len(found) == 1 and problem in found[0], found
