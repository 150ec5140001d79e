/** The public worker: options, handler registration, start / stop / run. */
import { badActivityName, type Activity, type Handler, type Predicate } from "./activity.js";
import { Core, DEFAULTS, defaultWorkerId, type StartOptions, type Started } from "./core.js";
import type { Json } from "./json.js";
import { stderrLogger, type Logger } from "./log.js";
import { connectionWithEnv, GrpcApi, type ConnectionOptions, type WiggleApi } from "./rpc.js";

/** Everything a {@link Worker} can be told; every field is optional. */
export interface WorkerOptions {
  /**
   * The server: a `host:port`, or connection options. What they leave unset comes from the
   * `WIGGLE_*` connection variables (docs/worker-protocol.md, "Connection"; {@link connectionWithEnv}).
   */
  readonly connection?: ConnectionOptions | string;
  /** The queues served. Default `["default"]`. */
  readonly queues?: readonly string[];
  /** The most tasks (SERVER steps or local runs) in flight at once. Default 16. */
  readonly concurrency?: number;
  /** LOCAL_ASYNC results buffered before a mid-run flush. Default 64. */
  readonly localBatchSize?: number;
  /** The lease owner the server records. Default `<host>:<pid>:<random>`. */
  readonly workerId?: string;
  /** How long the server may hold one PollTasks call open. Default 10 s. */
  readonly pollWaitMs?: number;
  /** The deadline of every other call. Default 30 s. */
  readonly callTimeoutMs?: number;
  /** How long a drain waits for running steps before it drops them as a crash would. Default 30 s. */
  readonly drainTimeoutMs?: number;
  /**
   * Also abort `step.signal` when the drain begins. A handler that then throws is given back
   * unrun (ReleaseTask, or a local run's handback, reason `shutdown`): no attempt is consumed,
   * and the step runs again on another worker. Default false: running steps finish.
   */
  readonly abortStepsOnDrain?: boolean;
  /** Task handlers by activity name, as {@link Worker.activity} registers them. */
  readonly activities?: Readonly<Record<string, Activity<never, unknown>>>;
  /** Predicate handlers by activity name, as {@link Worker.predicate} registers them. */
  readonly predicates?: Readonly<Record<string, Predicate<never>>>;
  /** The worker's own events. Default: warnings and errors on stderr. */
  readonly logger?: Logger;
}

/** Options for {@link Worker.run}. */
export interface RunOptions {
  /** The signals that drain the worker. Default `["SIGTERM", "SIGINT"]`; a second one stops at once. */
  readonly signals?: readonly NodeJS.Signals[];
}

function positiveInt(name: string, v: number | undefined, fallback: number): number {
  if (v === undefined) {
    return fallback;
  }
  if (!Number.isInteger(v) || v <= 0) {
    throw new RangeError(`${name} must be a positive integer, not ${String(v)}`);
  }
  return v;
}

function checkedName(what: string, name: string): string {
  if (typeof name !== "string" || name.length < 1 || name.length > 200) {
    throw new RangeError(`${what} ${JSON.stringify(name)} must be 1 to 200 characters`);
  }
  return name;
}

/**
 * A Wiggle worker: long-polls a server for tasks on its queues, runs the handler registered
 * under each task's activity, and reports back, in every execution mode
 * (docs/worker-protocol.md).
 *
 * ```ts
 * const worker = new Worker({ queues: ["orders"] })
 *   .activity("validate", async (order: Order, step) => ({ ...order, by: step.idempotencyKey }))
 *   .predicate("in_stock", (order: Order) => order.qty <= 10);
 * await worker.run(); // serves until SIGTERM or SIGINT, then drains
 * ```
 */
export class Worker {
  private readonly handlers = new Map<string, Handler>();
  private readonly options: WorkerOptions;
  private readonly apiFactory: () => WiggleApi;
  private core: Core | null = null;

  /** `api` replaces the gRPC client (tests; an in-memory server). */
  constructor(options: WorkerOptions = {}, api?: WiggleApi) {
    this.options = options;
    const queues = options.queues ?? ["default"];
    if (queues.length === 0) {
      throw new RangeError("a worker serves at least one queue");
    }
    queues.forEach((q) => checkedName("queue name", q));
    checkedName("worker id", options.workerId ?? "w");
    positiveInt("concurrency", options.concurrency, DEFAULTS.concurrency);
    positiveInt("localBatchSize", options.localBatchSize, DEFAULTS.localBatchSize);
    positiveInt("pollWaitMs", options.pollWaitMs, DEFAULTS.pollWaitMs);
    positiveInt("callTimeoutMs", options.callTimeoutMs, DEFAULTS.callTimeoutMs);
    positiveInt("drainTimeoutMs", options.drainTimeoutMs, DEFAULTS.drainTimeoutMs);
    for (const [name, fn] of Object.entries(options.activities ?? {})) {
      this.activity(name, fn as Activity);
    }
    for (const [name, fn] of Object.entries(options.predicates ?? {})) {
      this.predicate(name, fn as Predicate);
    }
    const conn = options.connection;
    this.apiFactory =
      api !== undefined
        ? () => api
        : () => new GrpcApi(connectionWithEnv(conn));
  }

  /**
   * Registers a task handler (also a join's combine or an await's `apply`). Its input is the
   * context ({@link Json}; `In` is what you expect it to be, unchecked), its return value
   * replaces the context. Throw {@link NonRetryableError} to fail the instance now; any other
   * throw fails the attempt and leaves the step's retry policy in charge.
   */
  activity<In = never, Out = unknown>(name: string, handler: Activity<In, Out>): this {
    return this.register(name, handler as unknown as Handler);
  }

  /** Registers a predicate handler (filter, choice arm, loop `while`): it returns the branch. */
  predicate<In = never>(name: string, handler: Predicate<In>): this {
    return this.register(name, handler as unknown as Handler);
  }

  private register(name: string, handler: Handler): this {
    const bad = badActivityName(name);
    if (bad !== undefined) {
      throw new RangeError(bad);
    }
    if (typeof handler !== "function") {
      throw new TypeError(`the handler of activity '${name}' is not a function`);
    }
    if (this.handlers.has(name)) {
      throw new Error(`activity '${name}' is already registered`);
    }
    if (this.core !== null) {
      throw new Error(`activity '${name}' registered after the worker started`);
    }
    this.handlers.set(name, handler);
    return this;
  }

  /** The registered activity names, sorted. */
  get activities(): string[] {
    return [...this.handlers.keys()].sort();
  }

  /** The lease owner the server records for this worker. */
  get id(): string {
    return this.coreOf().opts.workerId;
  }

  private coreOf(): Core {
    if (this.core === null) {
      const o = this.options;
      this.core = new Core(
        this.apiFactory(),
        {
          queues: [...(o.queues ?? ["default"])],
          concurrency: o.concurrency ?? DEFAULTS.concurrency,
          localBatchSize: o.localBatchSize ?? DEFAULTS.localBatchSize,
          workerId: o.workerId ?? defaultWorkerId(),
          pollWaitMs: o.pollWaitMs ?? DEFAULTS.pollWaitMs,
          callTimeoutMs: o.callTimeoutMs ?? DEFAULTS.callTimeoutMs,
          drainTimeoutMs: o.drainTimeoutMs ?? DEFAULTS.drainTimeoutMs,
          abortStepsOnDrain: o.abortStepsOnDrain ?? false,
          logger: o.logger ?? stderrLogger(),
        },
        this.handlers,
      );
    }
    return this.core;
  }

  /**
   * Starts an instance of `flow` with `input` through this worker's connection. When the worker
   * is serving and its first step is one this worker runs, the server hands that task back with
   * the answer and it runs here at once, with no poll in between (`eager` in the result; turn it
   * off with `{ eager: false }`). Rejects with an `RpcError` the server's refusal (an unknown
   * flow, an input its schema refuses, an id already taken by another flow or input).
   */
  startInstance(flow: string, input: Json = null, options: StartOptions = {}): Promise<Started> {
    return this.coreOf().startInstance(flow, input, options);
  }

  /** Starts polling in the background (opening the connection). */
  start(): this {
    if (this.handlers.size === 0) {
      throw new Error("register at least one activity before starting the worker");
    }
    this.coreOf().start();
    return this;
  }

  /**
   * Drains and stops: ends the open poll (EndPolls), gives back unrun whatever it still brings
   * (ReleaseTask, reason `shutdown`), lets running steps finish and local runs hand back what
   * they buffered. Past `timeoutMs` (default `drainTimeoutMs`) what is still held is dropped as
   * in a crash: the leases expire and the server redelivers. Resolves when stopped.
   */
  stop(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    if (this.core === null) {
      return Promise.resolve();
    }
    return this.core.stop(options.timeoutMs ?? this.core.opts.drainTimeoutMs);
  }

  /**
   * Starts the worker and serves until one of `signals` (SIGTERM, SIGINT) arrives, then drains.
   * A second signal stops at once. Resolves when the worker has stopped.
   */
  async run(options: RunOptions = {}): Promise<void> {
    const signals = options.signals ?? ["SIGTERM", "SIGINT"];
    this.start();
    const core = this.coreOf();
    let seen = 0;
    const onSignal = (signal: NodeJS.Signals): void => {
      seen++;
      if (seen === 1) {
        core.log.info("signal: draining", { signal });
        void this.stop();
      } else {
        core.log.warn("second signal: stopping without draining", { signal });
        core.abort();
      }
    };
    for (const s of signals) {
      process.on(s, onSignal);
    }
    try {
      await core.stopped;
    } finally {
      for (const s of signals) {
        process.off(s, onSignal);
      }
    }
  }
}
