/**
 * What a local run (local-run.ts) needs of the worker that holds its task: the step it runs
 * next, reporting, the worker's state and settings. Core (core.ts) provides it; the local run
 * names only this interface, so the two modules do not import each other.
 */

import type { Handler, Outcome } from "./activity.js";
import type { ReportBatcher } from "./batching.js";
import type { ExecutionMode } from "./graph.js";
import type { Lease } from "./lease.js";
import type { Logger } from "./log.js";
import type { Reporter } from "./reporting.js";
import type { Task } from "./rpc.js";
import type { Step } from "./step.js";
import type { StepSpan } from "./tracing.js";

export interface RunHost {
  /** 0 until the server first answers AdvanceRun, 1 once it did, -1 after UNIMPLEMENTED. */
  advanceRun: 0 | 1 | -1;
  readonly draining: boolean;
  /** Aborted when the worker stops without finishing: runs drop what they hold. */
  readonly abortSignal: AbortSignal;
  readonly log: Logger;
  readonly api: ReportBatcher;
  readonly opts: { readonly queues: readonly string[]; readonly localBatchSize: number };
  readonly handlers: ReadonlyMap<string, Handler>;
  stepOf(t: Task, nodeId: string, activity: string, attempt: number, mode: ExecutionMode, lease: Lease): Step;
  run(step: Step, input: Uint8Array, asPredicate: boolean, span?: TracedStep): Promise<Outcome>;
  /** True while steps are traced (docs/observability.md): a local run then names its spans. */
  readonly tracing: boolean;
  limited(out: Outcome, t: Task): Outcome;
  /** The worker's reports: a run's calls are resent, refused and released through it. */
  readonly reporter: Reporter;
}

/** A traced step: its task and where it stands in its run. */
export interface TracedStep extends StepSpan {
  readonly task: Task;
}
