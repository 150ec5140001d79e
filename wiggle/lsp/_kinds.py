"""Which of Wiggle's documents a file is: a flow, a scenario file, a schedule, or none of them.

Decided by the file's name where Wiggle's conventions name it (`*.scenarios.yaml`,
`*.schedule.yaml`), else by the key each kind must start with (`wiggle:`, `wiggle_test:`,
`schedule:`), so that an editor may hand the server every YAML file and only Wiggle's are
checked. A file that is none of them gets no diagnostics at all.
"""

from __future__ import annotations

import re
from enum import StrEnum

__all__ = ["DOCUMENT_SUFFIXES", "Kind", "kind_of"]

DOCUMENT_SUFFIXES = (".yaml", ".yml", ".json")


class Kind(StrEnum):
    FLOW = "flow"  # spec/schema/flow.schema.json
    SCENARIOS = "scenarios"  # spec/schema/scenario.schema.json (docs/testing.md)
    SCHEDULE = "schedule"  # spec/schema/schedule.schema.json (docs/schedules.md)
    OTHER = "other"


_NAMED = (
    (re.compile(r"\.scenarios\.(?:ya?ml|json)$"), Kind.SCENARIOS),
    (re.compile(r"\.schedule\.(?:ya?ml|json)$"), Kind.SCHEDULE),
)
# A top-level key of YAML (no indentation) or a key of a JSON document.
_KEYED = (
    (re.compile(r'^(?:wiggle_test|"wiggle_test")\s*:|"wiggle_test"\s*:', re.M), Kind.SCENARIOS),
    (re.compile(r'^(?:wiggle|"wiggle")\s*:|^\s*\{?\s*"wiggle"\s*:', re.M), Kind.FLOW),
    (re.compile(r'^(?:schedule|"schedule")\s*:', re.M), Kind.SCHEDULE),
    (re.compile(r"\$schema=\S*flow\.schema\.json"), Kind.FLOW),
)
#: How much of a file is looked at to tell its kind: the keys come first in every example.
_HEAD = 64 * 1024


def kind_of(path: str, text: str) -> Kind:
    """The kind of the document at `path` (its name) holding `text`."""
    if not path.endswith(DOCUMENT_SUFFIXES):
        return Kind.OTHER
    for pattern, kind in _NAMED:
        if pattern.search(path):
            return kind
    head = text[:_HEAD]
    for pattern, kind in _KEYED:
        if pattern.search(head):
            return kind
    return Kind.OTHER
