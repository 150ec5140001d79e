/**
 * The worker's machinery: the poll loop and its slots, eager starts, SERVER steps, the drain.
 * Reports (seq, resend, release, heartbeats) are in reporting.ts, local runs in local-run.ts,
 * batched reports in batching.ts. {@link Worker} (worker.ts) is the public face of one Core.
 */
import { setMaxListeners } from "node:events";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";

import { checkLimits, runHandler, type Handler, type Outcome } from "./activity.js";
import { ReportBatcher } from "./batching.js";
import { Definitions } from "./definitions.js";
import { isWorkerStep, type ExecutionMode, type Graph } from "./graph.js";
import { Lease } from "./lease.js";
import { LocalRun, readLoopCounts } from "./local-run.js";
import { Reporter } from "./reporting.js";
import type { RunHost, TracedStep } from "./run-host.js";
import { Slots } from "./slots.js";
import type { Logger } from "./log.js";
import { DEFAULT_BATCH_SIZE } from "./policy.js";
import {
  Backoff,
  Code,
  Outage,
  retryable,
  RpcError,
  sleep,
  type StartInstanceResponse,
  type Task,
  type WiggleApi,
} from "./rpc.js";
import { WorkerStoppingError, type Step } from "./step.js";
import { encode, type Json } from "./json.js";
import { loadTracer, tracingEnabled, type StepTracer } from "./tracing.js";

/** What {@link Core.startInstance} is told besides the flow and its input. */
export interface StartOptions {
  /** The version to start (the full `sha256:...`); default the newest registered. */
  readonly version?: string;
  /** A caller-chosen id: starting it again with the same flow and input returns the first. */
  readonly instanceId?: string;
  /** Ask for the first task in the start's answer, to run it here (default true). */
  readonly eager?: boolean;
  /** The call's deadline; default the worker's `callTimeoutMs`. */
  readonly timeoutMs?: number;
}

/** What a start did. */
export interface Started {
  readonly instanceId: string;
  readonly version: string;
  /** False when `instanceId` already named an instance of this flow and input. */
  readonly created: boolean;
  /** True when the first task came back with the answer and runs on this worker. */
  readonly eager: boolean;
}

/** What PollTasksRequest.sdk says. */
export const SDK = "wiggle-typescript/0.2.0";

/** The settings a Core runs with, defaults filled in. */
export interface CoreOptions {
  readonly queues: readonly string[];
  readonly concurrency: number;
  readonly localBatchSize: number;
  readonly workerId: string;
  readonly pollWaitMs: number;
  readonly callTimeoutMs: number;
  readonly drainTimeoutMs: number;
  readonly abortStepsOnDrain: boolean;
  readonly logger: Logger;
}

export const DEFAULTS = {
  concurrency: 16,
  localBatchSize: DEFAULT_BATCH_SIZE,
  pollWaitMs: 10_000,
  callTimeoutMs: 30_000,
  drainTimeoutMs: 30_000,
} as const;

/** `<host>:<pid>:<random>`: unique among a server's workers, stable for the process's life. */
export function defaultWorkerId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`.slice(-200);
}

export class Core implements RunHost {
  readonly defs: Definitions;
  /** 0 until the server first answers AdvanceRun, 1 once it did, -1 after UNIMPLEMENTED. */
  advanceRun: 0 | 1 | -1 = 0;
  draining = false;
  /** Makes a span per step attempt while tracing is on (docs/observability.md). */
  private tracer: StepTracer | null = null;
  /** Aborted when the drain begins. */
  readonly drainSignal: AbortSignal;
  /** Aborted when the worker stops without finishing: runs drop what they hold. */
  readonly abortSignal: AbortSignal;
  readonly log: Logger;
  private readonly drainController = new AbortController();
  private readonly abortController = new AbortController();
  private readonly pollController = new AbortController();
  private readonly slots: Slots;
  private readonly outage: Outage;
  private readonly tasks = new Set<Promise<void>>();
  private activityNames: string[] = [];
  private started = false;
  private noNewTasks = false;
  private pollerDone: Promise<void> = Promise.resolve();
  /** True while a PollTasks call is open (it holds the slots it asked tasks for). */
  private polling = false;
  private stopping: Promise<void> | null = null;
  private markStopped: () => void = () => undefined;
  /** Resolves when the worker has stopped (a drain finished). */
  readonly stopped: Promise<void> = new Promise((resolve) => {
    this.markStopped = resolve;
  });

  /** The server; reports of concurrent tasks share ReportBatch calls (batching.ts). */
  readonly api: ReportBatcher;
  /** The server's calls as given (StartInstance is not a report). */
  private readonly server: WiggleApi;
  /** Every report this worker sends: SERVER steps, releases, heartbeats, a run's calls. */
  readonly reporter: Reporter;

  constructor(
    api: WiggleApi,
    readonly opts: CoreOptions,
    readonly handlers: ReadonlyMap<string, Handler>,
  ) {
    this.log = opts.logger;
    this.api = new ReportBatcher(api, this.log);
    this.server = api;
    this.slots = new Slots(opts.concurrency);
    this.outage = new Outage(this.log);
    this.drainSignal = this.drainController.signal;
    this.abortSignal = this.abortController.signal;
    // Every task in flight, every call and every back-off listens to these: as many listeners
    // as the concurrency allows, which is no leak.
    setMaxListeners(0, this.drainSignal, this.abortSignal, this.pollController.signal);
    this.defs = new Definitions(api, this.log, opts.callTimeoutMs, this.abortSignal);
    this.reporter = new Reporter(this.api, opts, this.log, this.outage, this.abortSignal, this);
  }

  /** Every registered activity, sorted: what PollTasks and `next` list. */
  get activities(): string[] {
    return this.activityNames;
  }

  start(): void {
    if (this.stopping !== null) {
      throw new Error("the worker was stopped; make a new one");
    }
    if (this.started) {
      return;
    }
    this.started = true;
    this.activityNames = [...this.handlers.keys()].sort();
    // Tracing (OTEL_* variables) is loaded before the first poll, so every step is traced.
    const ready = tracingEnabled() ? loadTracer(this.log).then((t) => void (this.tracer = t)) : Promise.resolve();
    this.pollerDone = ready.then(() => this.pollLoop()).catch((e: unknown) => {
      this.log.error("the poll loop stopped on an error", { err: String(e) }); // a bug of ours
    });
    this.log.info("worker serving", { worker: this.opts.workerId, queues: this.opts.queues.join(",") });
  }

  // ---- polling ---------------------------------------------------------------------------

  /**
   * Takes free slots, long-polls for that many tasks, starts each on its slot. Slots are taken
   * before the call, so the server never leases this worker more than it can start at once. It
   * ends when the worker drains: the drain ends the open poll with EndPolls rather than
   * cancelling it, and a task such a poll still brings back is released unrun.
   */
  private async pollLoop(): Promise<void> {
    const backoff = new Backoff();
    const signal = this.pollController.signal;
    while (!this.draining && !signal.aborted) {
      if (!(await this.slots.take(signal))) {
        return;
      }
      const taken = 1 + this.slots.takeFree();
      if (this.draining) {
        this.slots.give(taken);
        return;
      }
      let tasks: Task[];
      this.polling = true;
      try {
        const resp = await this.api.pollTasks(
          {
            workerId: this.opts.workerId,
            queues: [...this.opts.queues],
            maxTasks: taken,
            waitMs: this.opts.pollWaitMs,
            activities: this.activityNames,
            slots: this.opts.concurrency,
            sdk: SDK,
          },
          // Held open up to waitMs by the server: the deadline must outlast it.
          { timeoutMs: this.opts.pollWaitMs + this.opts.callTimeoutMs, signal },
        );
        tasks = resp.tasks;
        this.outage.succeeded();
      } catch (e) {
        this.polling = false;
        this.slots.give(taken);
        const err = RpcError.of(e);
        if (signal.aborted || this.draining) {
          return;
        }
        if (retryable(err)) {
          this.outage.failed(err);
        } else {
          this.log.error("PollTasks failed", { err: err.message, code: err.code });
        }
        await sleep(backoff.next(), signal);
        continue;
      }
      this.polling = false;
      backoff.reset();
      if (this.draining) {
        this.slots.give(taken);
        await this.releaseAll(tasks);
        return;
      }
      if (tasks.length < taken) {
        this.slots.give(taken - tasks.length);
      }
      tasks.forEach((t, i) => {
        // More tasks than asked for is a server bug; run them rather than let their leases
        // lapse. Those extra ones hold no slot.
        this.startTask(t, i < taken);
      });
    }
  }

  // ---- eager start -------------------------------------------------------------------------

  /**
   * Starts an instance and, when this worker serves the first step, runs it here with no poll
   * (docs/worker-protocol.md, "Eager dispatch"): a slot is reserved first (a free one, or one
   * borrowed from the open poll, which holds every free slot while it waits), the server leases
   * the first task to this worker in the start's own transaction, and the task runs on that
   * slot. Without a slot, a started worker, or a first task here, it is a plain start.
   */
  async startInstance(flow: string, input: Json, options: StartOptions): Promise<Started> {
    const start = this.server.startInstance?.bind(this.server);
    if (start === undefined) {
      throw new Error("this connection cannot start instances (its API has no startInstance)");
    }
    const body = Buffer.from(encode(input).text, "utf8"); // a value with no JSON form throws here
    const reserved = options.eager !== false && this.reserveEagerSlot();
    let resp: StartInstanceResponse;
    try {
      resp = await start(
        {
          flow,
          version: options.version ?? "",
          input: body,
          instanceId: options.instanceId ?? "",
          eager: reserved ? this.reporter.eagerDispatch() : null,
        },
        { timeoutMs: options.timeoutMs ?? this.opts.callTimeoutMs },
      );
    } catch (e) {
      if (reserved) {
        this.slots.give(1);
      }
      throw RpcError.of(e);
    }
    let eager = false;
    if (reserved) {
      const task = resp.eagerTask;
      if (task === null) {
        this.slots.give(1);
      } else {
        // The drain may have begun since the reservation: the task is then given back unrun
        // (no attempt spent). startTask gives the slot back itself when it refuses.
        const draining = this.draining;
        if (draining) {
          this.slots.give(1);
        }
        eager = !draining && this.startTask(task, true);
        if (!eager) {
          this.log.info("eager task released: the worker is draining", { task: task.taskId });
          await this.releaseAll([task]);
        }
      }
    }
    return { instanceId: resp.instanceId, version: resp.version, created: resp.created, eager };
  }

  /** A slot for an eager task, or false (not serving, draining, or every slot busy running). */
  private reserveEagerSlot(): boolean {
    if (!this.started || this.draining || this.stopping !== null) {
      return false;
    }
    if (this.slots.tryTake()) {
      return true;
    }
    if (this.polling) {
      this.slots.takeOver();
      return true;
    }
    return false;
  }

  /** Gives back tasks the worker will not run, each with reason shutdown. */
  private async releaseAll(tasks: readonly Task[]): Promise<void> {
    await Promise.all(tasks.map((t) => this.reporter.release(t, new Lease(t), "shutdown")));
  }

  /** Runs `t` in the background; false once the drain stopped accepting tasks. */
  startTask(t: Task, holdsSlot: boolean): boolean {
    if (this.noNewTasks) {
      if (holdsSlot) {
        this.slots.give(1);
      }
      return false;
    }
    const p: Promise<void> = this.runTask(t).finally(() => {
      this.tasks.delete(p);
      if (holdsSlot) {
        this.slots.give(1);
      }
    });
    this.tasks.add(p);
    return true;
  }

  // ---- one task ----------------------------------------------------------------------------

  /** Runs `t`, then every task a report brought back (CompleteTask's `next`) on the same slot. */
  private async runTask(t: Task): Promise<void> {
    let next: Task | null = t;
    while (next !== null) {
      next = await this.runOne(next);
    }
  }

  private async runOne(t: Task): Promise<Task | null> {
    const lease = new Lease(t);
    lease.follow(this.abortSignal);
    if (this.opts.abortStepsOnDrain) {
      lease.follow(this.drainSignal);
    }
    lease.keepAlive((l) => this.reporter.beat(l));
    try {
      const graph = await this.localGraph(t);
      if (graph !== null) {
        await new LocalRun(this, t, graph, lease).run();
        return null;
      }
      const next = await this.serverStep(t, lease);
      if (next !== null && this.draining) {
        // Leased to us while we began to drain: give it back unrun, no attempt consumed.
        await this.reporter.release(next, new Lease(next), "shutdown");
        return null;
      }
      return next;
    } catch (e) {
      this.log.error("task crashed in the worker", { task: t.taskId, node: t.nodeId, err: String(e) });
      return null;
    } finally {
      lease.stop();
    }
  }

  /** The graph to chain on, or null to run the task as one SERVER step. */
  async localGraph(t: Task): Promise<Graph | null> {
    if (t.executionMode !== "LOCAL_SYNC" && t.executionMode !== "LOCAL_ASYNC") {
      return null;
    }
    if (this.advanceRun < 0) {
      return null;
    }
    const graph = await this.defs.get(t.flow, t.version);
    if (graph === null) {
      return null;
    }
    const node = graph.nodes.get(t.nodeId);
    if (node === undefined || !isWorkerStep(node)) {
      this.log.warn("task is at a node a worker does not run; running it as a SERVER step", {
        task: t.taskId,
        node: t.nodeId,
      });
      return null;
    }
    return graph;
  }

  /** The step object a handler gets. */
  stepOf(t: Task, nodeId: string, activity: string, attempt: number, mode: ExecutionMode, lease: Lease): Step {
    return {
      instanceId: t.instanceId,
      nodeId,
      attempt,
      flow: t.flow,
      version: t.version,
      activity,
      executionMode: mode,
      taskId: t.taskId,
      idempotencyKey: `${t.instanceId}/${nodeId}/${attempt}`,
      signal: lease.controller.signal,
    };
  }

  /** Runs one handler for a step of `t` under `lease` (inside its span when `span` is given). */
  run(step: Step, input: Uint8Array, asPredicate: boolean, span?: TracedStep): Promise<Outcome> {
    const call = (): Promise<Outcome> =>
      runHandler(
        this.handlers.get(step.activity),
        step.activity,
        input,
        step,
        asPredicate,
        () => this.opts.abortStepsOnDrain && this.draining && step.signal.aborted,
      );
    return this.tracer !== null && span !== undefined ? this.tracer.run(span.task, span, call) : call();
  }

  get tracing(): boolean {
    return this.tracer !== null;
  }

  /** `out`, or the non-retryable failure it is when its result breaks the server's limits. */
  limited(out: Outcome, t: Task): Outcome {
    return checkLimits(out, t.maxPayloadBytes);
  }

  /**
   * The one step of a SERVER task, then CompleteTask or FailTask. Without the graph the worker
   * cannot tell a predicate from a task; a boolean encodes as JSON true / false, which is what
   * CompleteTask expects for a predicate.
   */
  private async serverStep(t: Task, lease: Lease): Promise<Task | null> {
    const step = this.stepOf(t, t.nodeId, t.activity, t.attempt, "SERVER", lease);
    const span = this.tracer === null ? undefined : {
      task: t, nodeId: t.nodeId, activity: t.activity, attempt: t.attempt, mode: "SERVER",
      loops: readLoopCounts(t, this), position: 0, previous: "",
    };
    const out = this.limited(await this.run(step, t.input, false, span), t);
    if (out.kind === "failure" && out.interrupted === true) {
      await this.reporter.release(t, lease, "shutdown");
      return null;
    }
    return this.reporter.reportSingle(t, lease, out, true);
  }

  // ---- the drain ---------------------------------------------------------------------------

  /**
   * Drains: EndPolls (a poll that still brings tasks releases them unrun), running steps
   * finish, local runs hand back with reason shutdown. Past `timeoutMs` whatever is held is
   * dropped as in a crash (the leases expire and the server redelivers).
   */
  stop(timeoutMs: number): Promise<void> {
    if (this.stopping === null) {
      this.stopping = this.drain(timeoutMs);
    }
    return this.stopping;
  }

  /** Stops at once, as if crashed: runs drop their buffers, handlers see their signal. */
  abort(): void {
    this.draining = true;
    this.noNewTasks = true;
    this.abortController.abort(new WorkerStoppingError("the worker stopped without draining"));
    this.pollController.abort();
  }

  private async drain(timeoutMs: number): Promise<void> {
    // Draining is announced before the polls end, so a task a poll returns meanwhile is
    // released unrun, not left leased.
    this.draining = true;
    this.drainController.abort(new WorkerStoppingError("the worker is draining"));
    await this.endPolls();
    this.noNewTasks = true;
    let timer: NodeJS.Timeout | undefined;
    const done = await Promise.race([
      Promise.all([...this.tasks]).then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      }),
      new Promise<boolean>((resolve) => {
        if (this.abortSignal.aborted) {
          resolve(false);
        }
        this.abortSignal.addEventListener("abort", () => resolve(false), { once: true });
      }),
    ]);
    clearTimeout(timer);
    if (!done) {
      this.log.warn("drain cut short: what is still held is left to expire", { tasks: this.tasks.size });
    }
    this.abort();
    this.api.close();
    await this.tracer?.shutdown(); // buffered spans go out (two seconds at most)
    this.log.info("worker stopped", { worker: this.opts.workerId });
    this.markStopped();
  }

  /**
   * Ends the open poll: the server answers it (EndPolls) with whatever it holds. A server
   * without EndPolls, or one that does not end the poll in time, gets it cancelled instead.
   */
  private async endPolls(): Promise<void> {
    if (!this.started) {
      return;
    }
    for (let i = 0; i < 3 && !this.abortSignal.aborted; i++) {
      try {
        await this.api.endPolls(
          { workerId: this.opts.workerId },
          { timeoutMs: this.opts.callTimeoutMs, signal: this.abortSignal },
        );
      } catch (e) {
        if (RpcError.of(e).code === Code.UNIMPLEMENTED) {
          break;
        }
      }
      // A poll sent just as the drain began: end it too.
      if (await within(this.pollerDone, 1_000)) {
        return;
      }
    }
    this.pollController.abort();
    await this.pollerDone;
  }
}

/** Whether `p` settles within `ms`. */
function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.then(() => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
