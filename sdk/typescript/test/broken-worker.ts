/**
 * Deliberately broken conformance workers: this SDK's conformance worker with one protocol rule
 * broken, for the corpus's negative controls (tests/conformance/test_negative_controls_typescript.py).
 * `node build/test/broken-worker.js FLAW` patches one thing, then serves the conformance
 * activities exactly as the `wiggle-conformance-worker` bin does; `--list` prints the flaws.
 * The flaws are those of tests/conformance/broken_worker.py, for the Python worker, but for
 * `retries-results-too-deep-to-encode`: this worker's encoder stops at the depth limit, and
 * one without that stop overflows its stack only thousands of levels deep, which no corpus
 * case reaches (test/protocol.test.ts checks 5,000 and 100,000 levels).
 */
import { runHandler, type Outcome } from "../src/activity.js";
import { ReportBatcher } from "../src/batching.js";
import { main } from "../src/conformance/main.js";
import { Core } from "../src/core.js";
import { isExpressionNode, type GraphNode } from "../src/graph.js";
import { Lease } from "../src/lease.js";
import { LocalRun } from "../src/local-run.js";
import { Reporter } from "../src/reporting.js";
import { resendable, RpcError, sleep, type CallOptions, type StepResult, type Task } from "../src/rpc.js";
import type { Step } from "../src/step.js";

/** What the private state of a LocalRun holds, for the patches below. */
interface RunState {
  mode: string;
  buffer: unknown[];
  core: Core;
}

/** What the private state of a Reporter holds, for the patches below. */
interface ReporterState {
  opts: { callTimeoutMs: number };
  abortSignal: AbortSignal;
}

/** What the private state of a Core holds, for the patches below. */
interface CoreState {
  pollController: AbortController;
  pollerDone: Promise<void>;
  markStopped: () => void;
  startTask(t: Task, holdsSlot: boolean): boolean;
}

type Send<T> = (o: CallOptions & { seq?: number }) => Promise<T>;
type Submit = (kind: string, req: { seq?: number }, opts: CallOptions & { seq?: number }) => Promise<unknown>;
const proto = (c: object): Record<string, unknown> => c as unknown as Record<string, unknown>;

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
  // Numbers no report (seq 0), and resends a report of unknown fate so.
  "resends-without-seq": () => {
    Lease.prototype.nextSeq = () => 0;
  },
  // Gives a report up when its answer is lost, instead of resending it.
  "never-resends": () => {
    Reporter.prototype.report = function <T>(this: Reporter, _lease: Lease, send: (o: CallOptions) => Promise<T>): Promise<T> {
      const r = this as unknown as ReporterState;
      return send({ timeoutMs: r.opts.callTimeoutMs, signal: r.abortSignal });
    };
  },
  // Resends a report whose answer was lost under the next seq, as if the lost one was applied.
  "resends-with-a-new-seq": () => {
    const submit = proto(ReportBatcher.prototype)["submit"] as Submit;
    proto(ReportBatcher.prototype)["submit"] = function (this: ReportBatcher, kind: string, req: { seq?: number }, opts: CallOptions & { seq?: number }) {
      return submit.call(this, kind, opts.seq === undefined ? req : { ...req, seq: opts.seq }, opts);
    };
    Reporter.prototype.report = async function <T>(this: Reporter, lease: Lease, send: Send<T>): Promise<T> {
      const r = this as unknown as ReporterState;
      for (let i = 0; ; i++) {
        const seq = lease.nextSeq();
        try {
          const resp = await send({ timeoutMs: r.opts.callTimeoutMs, signal: r.abortSignal, seq });
          lease.applied(seq);
          return resp;
        } catch (e) {
          const err = RpcError.of(e);
          if (!resendable(err) || i >= 20) {
            throw err;
          }
          lease.applied(seq); // taken for applied: the resend gets the next number
          await sleep(100);
        }
      }
    } as typeof Reporter.prototype.report;
  },
  // On SIGTERM stops at once: no hand-back, no ReleaseTask.
  "exits-without-handing-back": () => {
    Core.prototype.stop = function (this: Core): Promise<void> {
      this.abort();
      this.api.close();
      (this as unknown as CoreState).markStopped();
      return Promise.resolve();
    };
  },
  // Sends results over the payload or depth limit to the server.
  "skips-result-limits": () => {
    Core.prototype.limited = (out: Outcome) => out;
    Core.prototype.run = function (this: Core, step: Step, input: Uint8Array, asPredicate: boolean): Promise<Outcome> {
      const interrupted = (): boolean => this.opts.abortStepsOnDrain && this.draining && step.signal.aborted;
      return runHandler(this.handlers.get(step.activity), step.activity, input, step, asPredicate, interrupted, Infinity);
    };
  },
  // Gives up a task whose report was refused without releasing it.
  "keeps-refused-tasks": () => {
    Reporter.prototype.refused = () => Promise.resolve();
  },
  // On a drain cancels its open poll instead of ending it with EndPolls.
  "cancels-its-poll": () => {
    proto(Core.prototype)["endPolls"] = async function (this: Core): Promise<void> {
      const core = this as unknown as CoreState;
      core.pollController.abort();
      await core.pollerDone;
    };
  },
  // Stops a local run in front of a condition or set node, as a worker that knows no
  // expression kinds would: like in front of another queue's step.
  "hands-back-at-expressions": () => {
    LocalRun.prototype.chainsThrough = () => false;
    const between = proto(LocalRun.prototype)["betweenSteps"] as (next: GraphNode) => Promise<unknown>;
    proto(LocalRun.prototype)["betweenSteps"] = function (this: LocalRun, next: GraphNode) {
      return isExpressionNode(next) ? Promise.resolve("other_queue") : between.call(this, next);
    };
  },
  // Runs a task that arrives during a drain instead of releasing it.
  "runs-tasks-received-while-draining": () => {
    proto(Core.prototype)["releaseAll"] = function (this: Core, tasks: readonly Task[]): Promise<void> {
      tasks.forEach((t) => (this as unknown as CoreState).startTask(t, false));
      return Promise.resolve();
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
