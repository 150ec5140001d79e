"""What a flow document refers to outside itself: the flows its `subflow` steps start."""

from __future__ import annotations

import os
from dataclasses import dataclass

from wiggle.compiler._checks import iter_steps
from wiggle.compiler._loader import MAX_BYTES, load_document

__all__ = ["SubflowRef", "subflow_references"]


@dataclass(frozen=True)
class SubflowRef:
    """One `subflow` step: the flow (and pinned version) it starts, and where it is written."""

    flow: str
    version: str | None
    file: str
    line: int
    column: int

    def where(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


def subflow_references(path: str | os.PathLike[str]) -> list[SubflowRef]:
    """The subflow steps of a flow file, in document order (the file is assumed valid: compile
    it first; an unreadable or malformed one yields what could be found)."""
    name = os.fspath(path)
    with open(name, "rb") as handle:
        loaded = load_document(handle.read(MAX_BYTES + 1), name)
    doc = loaded.value if isinstance(loaded.value, dict) else {}
    refs = []
    for step, where in iter_steps(doc.get("steps"), ("steps",)):
        target = step.get("subflow")
        if isinstance(target, str):
            line, column = loaded.source.value((*where, "subflow"))
            version = step.get("version")
            refs.append(
                SubflowRef(
                    target, version if isinstance(version, str) else None, name, line, column
                )
            )
    return refs
