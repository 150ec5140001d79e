"""Benchmark `wiggle lsp`: diagnostics of a 200-step flow after a change, over stdio.

    python scripts/bench_lsp.py                  # 200+ steps, 30 changes
    python scripts/bench_lsp.py --steps 1000 --changes 10 --debounce-ms 50

Starts `wiggle lsp` as an editor would (a subprocess, JSON-RPC on its stdin and stdout) on a
temporary workspace holding the flow of scripts/bench_compile.py, opens it, then changes one
step at a time, every other change making a mistake and the next one mending it, and times each
from sending textDocument/didChange to receiving the textDocument/publishDiagnostics of that
version (which must say what the change did: one problem, or none). Prints the check alone as
the server runs it (in this process, warm), the change-to-diagnostics times, the server's CPU
time per change (what the latency comes to on an idle core, whatever else the machine runs) and
the load average. Not a test: the numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil
from bench_compile import generate
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from wiggle.lsp._analysis import Analyser
from wiggle.lsp._kinds import Kind


def changed(text: str, n: int) -> tuple[str, int]:
    """The text with its n-th change, and how many problems it has (odd: a mistake)."""
    if n % 2:
        return text.replace("timeout: 2d", "timeout: 0d", 1), 1
    return text.replace("timeout: 2d", f"timeout: {n + 2}d", 1), 0


def check_alone(text: str, repeat: int) -> float:
    """The best time of the server's check of `text` after a change, in this process, warm
    (the steps the change left alone known valid, as in the server)."""
    analyser = Analyser(lambda path: None)
    analyser.analyse(Kind.FLOW, "bench.yaml", text)
    best = float("inf")
    for n in range(2, 2 * repeat + 2, 2):  # mends, each a new text
        best = min(best, analyser.analyse(Kind.FLOW, "bench.yaml", changed(text, n)[0]).seconds)
    return best


def _cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


async def over_stdio(
    text: str, changes: int, debounce_ms: float | None
) -> tuple[list[float], float]:
    """Each change's time to its diagnostics, and the server's CPU seconds per change."""
    client = LanguageClient("bench-lsp", "1")
    arrived: dict[int | None, tuple[float, int]] = {}
    event = asyncio.Event()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(params: types.PublishDiagnosticsParams) -> None:
        arrived[params.version] = (time.perf_counter(), len(params.diagnostics))
        event.set()

    async def diagnostics(version: int) -> tuple[float, int]:
        while version not in arrived:
            event.clear()
            await asyncio.wait_for(event.wait(), 60)
        return arrived[version]

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        flow = root / "bench.yaml"
        flow.write_text(text)
        await client.start_io(sys.executable, "-m", "wiggle", "lsp")
        options = {} if debounce_ms is None else {"debounceMs": debounce_ms}
        await client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(),
                root_uri=root.as_uri(),
                initialization_options=options,
            )
        )
        client.initialized(types.InitializedParams())
        uri = flow.as_uri()
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="yaml", version=0, text=text
                )
            )
        )
        await diagnostics(0)
        server = client._server  # the subprocess pygls started
        assert server is not None
        cpu_before = _cpu_s(server.pid)
        took = []
        for n in range(1, changes + 1):
            new_text, problems = changed(text, n)
            sent = time.perf_counter()
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=n),
                    content_changes=[types.TextDocumentContentChangeWholeDocument(text=new_text)],
                )
            )
            at, found = await diagnostics(n)
            if found != problems:
                raise SystemExit(f"change {n}: {found} problems published, {problems} expected")
            took.append(at - sent)
        cpu = (_cpu_s(server.pid) - cpu_before) / changes
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
    return took, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--debounce-ms", type=float, default=None, help="default: the server's")
    args = parser.parse_args(argv)
    text = generate(args.steps)
    alone = check_alone(text, 10)
    took, cpu = asyncio.run(over_stdio(text, args.changes, args.debounce_ms))
    took.sort()
    ms = [t * 1000 for t in took]
    p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
    print(
        f"{args.steps}+ steps ({len(text)} bytes): the check alone {alone * 1000:.1f} ms "
        f"(best of 10); change -> diagnostics over stdio, {len(ms)} changes: median "
        f"{statistics.median(ms):.1f} ms, p90 {p90:.1f} ms, min {ms[0]:.1f}, max {ms[-1]:.1f}; "
        f"server CPU per change {cpu * 1000:.1f} ms; load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
