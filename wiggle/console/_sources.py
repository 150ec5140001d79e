"""What the flow files say that the server does not keep: a flow's description and a sample
input for its start form.

A registered version is its canonical graph only (descriptions are documentation, not part of
the hash: docs/graph.md). Given a directory (`wiggle console --flows DIR`; `wiggle run --console`
uses the flow file's own), the console reads the flow files there (`*.yaml`, `*.yml`,
`*.json`) and their samples (`samples/NAME.json`, as definitions/ keeps them). Without a sample
file, the first of the input schema's `examples` (or its `default`) is the sample. Files are
read again when they change (by modification time); a file that does not compile is skipped.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["FlowAbout", "FlowSources", "sample_of_schema"]

_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class FlowAbout:
    """A flow as its file describes it."""

    name: str
    version: str  # the version the file compiles to
    description: str
    steps: dict[str, str]  # node id -> the step's description, where it has one
    sample: Any  # the sample input; None when there is none
    has_sample: bool
    path: str

    @property
    def file(self) -> str:
        """The file's name within the directory (what a page shows; never the machine path)."""
        return Path(self.path).name


def sample_of_schema(schema: Any) -> tuple[bool, Any]:
    """(True, value) for the first `examples` entry or the `default` of an input schema."""
    if isinstance(schema, dict):
        examples = schema.get("examples")
        if isinstance(examples, list) and examples:
            return True, examples[0]
        if "default" in schema:
            return True, schema["default"]
    return False, None


def _step_descriptions(steps: Any, out: dict[str, str]) -> None:
    """Descriptions of steps that name their node (`task: x`, `id: y`), nested blocks too."""
    if not isinstance(steps, list):
        return
    for step in steps:
        if not isinstance(step, dict):
            continue
        node = step.get("id") or step.get("task") or step.get("await") or step.get("subflow")
        if isinstance(node, str) and isinstance(step.get("description"), str):
            out[node] = step["description"]
        for value in step.values():
            if isinstance(value, list):
                _step_descriptions(value, out)
            elif isinstance(value, dict):
                _step_descriptions(value.get("steps"), out)
                for branch in value.values():
                    _step_descriptions(branch, out)


def _read(path: Path) -> FlowAbout | None:
    """The flow file at `path` (its sample is read by `FlowSources.about`); None when it does
    not compile."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from wiggle.compiler import load_flow_file
    from wiggle.errors import FlowError

    try:
        flow = load_flow_file(path)
        document = YAML(typ="safe", pure=True).load(path.read_bytes())
    except (FlowError, OSError, ValueError, YAMLError):
        return None
    if not isinstance(document, dict):
        return None
    description = document.get("description")
    steps: dict[str, str] = {}
    _step_descriptions(document.get("steps"), steps)
    has_sample, sample = sample_of_schema(flow.document.get("input"))
    return FlowAbout(
        flow.name,
        flow.version,
        description if isinstance(description, str) else "",
        steps,
        sample,
        has_sample,
        str(path),
    )


def _with_sample_file(about: FlowAbout) -> FlowAbout:
    """`about` with the sample of samples/NAME.json beside its file, when there is one."""
    sample_file = Path(about.path).parent / "samples" / f"{about.name}.json"
    try:
        sample = orjson.loads(sample_file.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return about
    return dataclasses.replace(about, sample=sample, has_sample=True)


class FlowSources:
    """The flow files of one directory, by flow name. Thread-safe."""

    def __init__(self, directory: str | None) -> None:
        self.directory = Path(directory) if directory else None
        self._lock = threading.Lock()
        self._seen: dict[Path, tuple[float, FlowAbout | None]] = {}

    def about(self, name: str, version: str = "") -> FlowAbout | None:
        """The file of flow `name`: the one that compiles to `version` when there is one, else
        any file of that name."""
        found = [a for a in self._scan() if a.name == name]
        exact = [a for a in found if a.version == version]
        chosen = exact or found
        return _with_sample_file(chosen[0]) if chosen else None

    def _scan(self) -> list[FlowAbout]:
        if self.directory is None or not self.directory.is_dir():
            return []
        out = []
        with self._lock:
            for path in sorted(self.directory.iterdir()):
                if path.suffix not in _SUFFIXES or not path.is_file():
                    continue
                mtime = path.stat().st_mtime
                known = self._seen.get(path)
                if known is None or known[0] != mtime:
                    known = self._seen[path] = (mtime, _read(path))
                if known[1] is not None:
                    out.append(known[1])
        return out
