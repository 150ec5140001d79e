"""One document's text → everything the features answer from: the problems the real checks
find, the data read with its positions, and for a flow its compiled graph.

Flows go through `wiggle.compiler.analyse_flow`, the one pass `wiggle validate` makes; scenario
files through `wiggle.testing`'s checker (the handlers file looked for, not imported: the server
never runs the workspace's code); schedules through `wiggle.schedules`. Nothing here raises: an
unexpected failure is one problem at the top of the file.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from wiggle.compiler import FlowAnalysis, SourceMap, analyse_flow, load_document
from wiggle.errors import Diagnostic, FlowError
from wiggle.lsp._kinds import Kind

__all__ = ["Analyser", "Analysis"]

_log = logging.getLogger(__name__)

#: Reads another file's text: the editor's buffer when it is open, else the disk; None if absent.
Reader = Callable[[str], str | None]


@dataclass(frozen=True)
class Analysis:
    kind: Kind
    path: str
    text: str
    problems: tuple[Diagnostic, ...] = ()
    document: Any = None
    source: SourceMap | None = None
    flow: FlowAnalysis | None = None  # a flow's own; for a scenario file, the flow under test
    flow_path: str | None = None  # the file of `flow` (the document itself for a flow)
    seconds: float = 0.0  # how long the checks took


class Analyser:
    """Analyses documents; keeps the flows scenario files test, compiled once per text."""

    def __init__(self, read: Reader) -> None:
        self.read = read
        self._tested: dict[str, tuple[str, FlowAnalysis]] = {}

    def analyse(self, kind: Kind, path: str, text: str) -> Analysis:
        began = time.perf_counter()
        try:
            found = self._analyse(kind, path, text)
        except Exception as exc:  # a bug of ours must not take the editor's server down
            _log.exception("checking %s failed", path)
            problem = Diagnostic(path, 1, 1, f"wiggle lsp could not check this file: {exc!r}")
            found = Analysis(kind, path, text, (problem,))
        return replace(found, seconds=time.perf_counter() - began)

    def _analyse(self, kind: Kind, path: str, text: str) -> Analysis:
        if kind is Kind.FLOW:
            flow = analyse_flow(text, path)
            return Analysis(kind, path, text, flow.problems, flow.document, flow.source, flow, path)
        if kind is Kind.SCENARIOS:
            return self._scenarios(path, text)
        if kind is Kind.SCHEDULE:
            return self._schedule(path, text)
        return Analysis(kind, path, text)

    def _read_document(self, path: str, text: str) -> tuple[Any, SourceMap | None]:
        try:
            loaded = load_document(text, path)
        except FlowError:
            return None, None
        return loaded.value, loaded.source

    def _scenarios(self, path: str, text: str) -> Analysis:
        from wiggle.testing import check_scenarios

        problems: tuple[Diagnostic, ...] = ()
        try:
            check_scenarios(text, path, load_handlers=False)
        except FlowError as exc:
            problems = exc.diagnostics
        document, source = self._read_document(path, text)
        flow_path, flow = None, None
        named = document.get("flow") if isinstance(document, dict) else None
        if isinstance(named, str) and named:
            flow_path = os.path.normpath(os.path.join(os.path.dirname(path), named))
            flow = self.tested(flow_path)
        return Analysis(Kind.SCENARIOS, path, text, problems, document, source, flow, flow_path)

    def tested(self, flow_path: str) -> FlowAnalysis | None:
        """The analysis of the flow file at `flow_path`, compiled again only when it changed."""
        text = self.read(flow_path)
        if text is None:
            return None
        cached = self._tested.get(flow_path)
        if cached is not None and cached[0] == text:
            return cached[1]
        flow = analyse_flow(text, flow_path)
        self._tested[flow_path] = (text, flow)
        return flow

    def _schedule(self, path: str, text: str) -> Analysis:
        from wiggle.schedules import load_schedule

        problems: tuple[Diagnostic, ...] = ()
        try:
            load_schedule(text, path)
        except FlowError as exc:
            problems = exc.diagnostics
        document, source = self._read_document(path, text)
        return Analysis(Kind.SCHEDULE, path, text, problems, document, source)
