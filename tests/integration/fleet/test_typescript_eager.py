"""The TypeScript worker's eager start against a real server (docs/worker-protocol.md, "Eager
dispatch"): `Worker.startInstance` reserves a slot, the server leases the first task to it in
the start's own transaction, and the worker runs it without polling for it. A start whose first
step this worker does not serve is a plain start."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import TS_SDK
from wiggle.server import embedded_stack

FLOW = """
wiggle: 1
name: ts-eager
steps:
  - task: a
  - task: b
"""

ELSEWHERE = """
wiggle: 1
name: ts-elsewhere
steps:
  - task: a
    queue: other
"""

SCRIPT = """
import { createInterface } from "node:readline";
import { Worker } from "%(index)s";

const worker = new Worker({ connection: process.argv[2], concurrency: 2, workerId: "ts-eager-1" })
  .activity("a", async (c) => ({ ...c, a: true }))
  .activity("b", async (c) => ({ ...c, b: true }));
worker.start();
const results = [];
for (let i = 0; i < 5; i++) {
  results.push(await worker.startInstance("ts-eager", { n: i }, { instanceId: `e-${i}` }));
}
results.push(await worker.startInstance("ts-eager", { n: 0 }, { instanceId: "e-0" }));
results.push(await worker.startInstance("ts-elsewhere", {}, { instanceId: "x-0" }));
try {
  await worker.startInstance("nope", {});
} catch (e) {
  results.push({ refused: e.errorCode, message: e.message });
}
console.log(JSON.stringify(results));
// Serve until told to stop (stdin closes), then drain.
for await (const _ of createInterface({ input: process.stdin })) {}
await worker.stop();
"""


def test_the_typescript_worker_runs_the_first_task_of_what_it_starts(
    tmp_path: Path, typescript_worker_script: Path
) -> None:
    script = tmp_path / "eager.mjs"
    script.write_text(SCRIPT % {"index": (TS_SDK / "dist/esm/index.js").as_uri()})
    with embedded_stack() as st:
        st.client.deploy(FLOW.encode())
        st.client.deploy(ELSEWHERE.encode())
        with subprocess.Popen(
            ["node", str(script), st.address],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as node:
            assert node.stdin is not None and node.stdout is not None and node.stderr is not None
            try:
                line = node.stdout.readline()
                assert line, node.stderr.read()
                results = json.loads(line)
                for i in range(5):
                    done = st.client.wait(f"e-{i}", timeout=30, events=True)
                    assert done.status == "COMPLETED"
                    assert done.context == {"n": i, "a": True, "b": True}
                    # The first step was leased in the start's own transaction, to this worker.
                    (first,) = [e for e in done.events if e.kind == "step_started"][:1]
                    assert (first.node_id, first.detail) == (
                        "a",
                        {"worker": "ts-eager-1", "eager": True},
                    )
            finally:
                node.stdin.close()  # the script drains and exits
                node.wait(timeout=30)
    assert node.returncode == 0
    eager = results[:5]
    assert [r["instanceId"] for r in eager] == [f"e-{i}" for i in range(5)]
    assert all(r["eager"] and r["created"] for r in eager), eager
    again, elsewhere, refused = results[5:]
    assert (again["created"], again["eager"]) == (False, False)  # the same start: no new task
    assert (elsewhere["created"], elsewhere["eager"]) == (True, False)  # not this worker's queue
    assert refused["refused"] == "DEFINITION_NOT_FOUND"
