/**
 * A Wiggle worker in TypeScript (docs/worker-protocol.md): async handlers bound by activity
 * name, every execution mode, heartbeats, drain on SIGTERM.
 *
 * ```ts
 * import { Worker, NonRetryableError } from "@wiggle-engine/worker";
 *
 * await new Worker({ queues: ["orders"] })
 *   .activity("validate", async (order: Order, step) => ({ ...order, checked_by: step.idempotencyKey }))
 *   .predicate("in_stock", (order: Order) => order.qty <= 10)
 *   .run();
 * ```
 */
export { Worker, type RunOptions, type WorkerOptions } from "./worker.js";
export type { Activity, Predicate } from "./activity.js";
export { LeaseLostError, NonRetryableError, WorkerStoppingError, type Step } from "./step.js";
export {
  decode,
  encode,
  JsonFloat,
  JsonSyntaxError,
  MAX_DEPTH,
  NotJsonError,
  stringify,
  TooDeepError,
  type Json,
  type JsonObject,
} from "./json.js";
export type { ExecutionMode } from "./graph.js";
export {
  CHANNEL_OPTIONS,
  connectionFromEnv,
  DEFAULT_ADDRESS,
  type ConnectionOptions,
  RpcError,
  type TlsOptions,
} from "./rpc.js";
export { stderrLogger, type Logger, type LogLevel } from "./log.js";
export { SDK, type StartOptions, type Started } from "./core.js";
export {
  compileExpression,
  ERROR_KINDS,
  EvaluationError,
  ExpressionInvalid,
  type ErrorKind,
  type Expression,
  type Instance,
} from "./expressions.js";
