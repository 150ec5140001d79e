/** What a handler sees besides its input: the step, and the errors it may throw. */
import type { ExecutionMode } from "./graph.js";

/**
 * The step a handler is running. `(instanceId, nodeId, attempt)` make an idempotency key
 * ({@link Step.idempotencyKey}): stable across a redelivery of the same attempt, new for a retry.
 */
export interface Step {
  readonly instanceId: string;
  readonly nodeId: string;
  /** From 1. A step reached by chaining in a local run is at attempt 1. */
  readonly attempt: number;
  readonly flow: string;
  /** The flow's version: `sha256:<hex>` of its graph. */
  readonly version: string;
  readonly activity: string;
  readonly executionMode: ExecutionMode;
  /**
   * The leased task. In a local run every step after the first shares the task id of the run's
   * first step.
   */
  readonly taskId: string;
  /** `${instanceId}/${nodeId}/${attempt}`. */
  readonly idempotencyKey: string;
  /**
   * Aborted when the step's result can no longer be used: the lease was lost (the instance was
   * cancelled or finished, or the server gave the task to another worker), or the worker stops
   * without finishing (its drain deadline passed, a second signal). With
   * `abortStepsOnDrain: true` it is also aborted when the worker begins to drain. Pass it to
   * `fetch` and the like; `signal.reason` says why (a {@link LeaseLostError} or a
   * {@link WorkerStoppingError}).
   */
  readonly signal: AbortSignal;
}

/** Fails the step for good: no retry, the instance fails now with this message. */
export class NonRetryableError extends Error {
  override name = "NonRetryableError";
}

/** `step.signal.reason` when the lease was lost. */
export class LeaseLostError extends Error {
  override name = "LeaseLostError";
}

/** `step.signal.reason` when the worker drains or stops. */
export class WorkerStoppingError extends Error {
  override name = "WorkerStoppingError";
}
