/**
 * Deliberately broken conformance workers: this SDK's conformance worker with one protocol rule
 * broken, for the corpus's negative controls (tests/conformance/test_negative_controls_typescript.py).
 * `node build/test/broken-worker.js FLAW` patches one thing, then serves the conformance
 * activities exactly as the `wiggle-conformance-worker` bin does; `--list` prints the flaws.
 * The flaws are those of tests/conformance/broken_worker.py, for the Python worker.
 */
import { main } from "../src/conformance/main.js";
import { Core } from "../src/core.js";
import type { GraphNode } from "../src/graph.js";
import { Lease } from "../src/lease.js";
import { LocalRun } from "../src/local-run.js";
import type { Outcome } from "../src/activity.js";
import type { StepResult } from "../src/rpc.js";

/** What the private state of a LocalRun holds, for the patches below. */
interface RunState {
  mode: string;
  buffer: unknown[];
  core: Core;
}

const FLAWS: Record<string, () => void> = {
  // Runs every LOCAL task as one SERVER step (CompleteTask), never AdvanceRun.
  "never-chains": () => {
    Core.prototype.localGraph = () => Promise.resolve(null);
  },
  // LOCAL_ASYNC buffers the whole run: no checkpoint, batch or size flush.
  "async-flushes-only-at-the-end": () => {
    LocalRun.prototype.flushDue = function (this: LocalRun): boolean {
      return (this as unknown as RunState).mode === "LOCAL_SYNC";
    };
    LocalRun.prototype.overLimit = () => false;
  },
  // LOCAL_ASYNC does not flush after a checkpoint step.
  "ignores-checkpoint": () => {
    const original = LocalRun.prototype.flushDue;
    LocalRun.prototype.flushDue = function (this: LocalRun, node: GraphNode): boolean {
      const run = this as unknown as RunState;
      if (run.mode === "LOCAL_ASYNC" && node.kind === "task" && node.checkpoint === true) {
        return run.buffer.length >= run.core.opts.localBatchSize;
      }
      return original.call(this, node);
    };
  },
  // Never notices that its lease is lost.
  "keeps-running-after-lease-lost": () => {
    Object.defineProperty(Lease.prototype, "lost", { get: () => "" });
    Lease.prototype.lose = () => undefined;
  },
  // Reports a predicate's boolean as a JSON true/false context.
  "predicate-as-context": () => {
    const original = LocalRun.prototype.stepResult;
    LocalRun.prototype.stepResult = function (this: LocalRun, nodeId: string, out: Outcome): StepResult {
      if (out.kind === "predicate") {
        return { nodeId, context: Buffer.from(String(out.value)) };
      }
      return original.call(this, nodeId, out);
    };
  },
};

const flaw = process.argv[2] ?? "";
if (flaw === "--list") {
  process.stdout.write(`${Object.keys(FLAWS).sort().join("\n")}\n`);
  process.exit(0);
}
const breakIt = FLAWS[flaw];
if (breakIt === undefined) {
  process.stderr.write(`usage: broken-worker.js FLAW (${Object.keys(FLAWS).join(", ")})\n`);
  process.exit(2);
}
breakIt();
main().then((code) => process.exit(code));
