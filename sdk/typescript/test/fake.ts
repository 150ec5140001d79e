/** An in-memory Wiggle server for unit tests: records every call, answers as told. */
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { Core, type CoreOptions } from "../src/core.js";
import type { Handler } from "../src/activity.js";
import type { Logger } from "../src/log.js";
import {
  Code,
  RpcError,
  type AdvanceRunRequest,
  type AdvanceRunResponse,
  type CallOptions,
  type CompleteTaskRequest,
  type Definition,
  type EndPollsResponse,
  type FailTaskRequest,
  type HeartbeatRequest,
  type HeartbeatResponse,
  type PollTasksRequest,
  type PollTasksResponse,
  type ReleaseTaskRequest,
  type StartInstanceRequest,
  type StartInstanceResponse,
  type StepResult,
  type Task,
  type TaskReportResponse,
  type WiggleApi,
} from "../src/rpc.js";

/** The repository's root, from build/test/. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");

export const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export interface Call {
  readonly method: string;
  readonly req: unknown;
  readonly opts?: CallOptions | undefined;
}

type Answer<T> = T | RpcError | ((req: never) => T | RpcError | Promise<T | RpcError>);

/** One queued answer per call of a method; when none is queued, the default answer. */
export class FakeApi implements WiggleApi {
  readonly calls: Call[] = [];
  readonly queued = new Map<string, Answer<unknown>[]>();
  readonly definitions = new Map<string, Buffer>();
  /** Tasks the next polls hand out, one array per poll. */
  readonly polls: Task[][] = [];
  private pendingPoll: ((tasks: Task[]) => void) | null = null;
  closed = false;

  /** Queues `answers` for the next calls of `method`. */
  answer(method: string, ...answers: Answer<unknown>[]): void {
    const q = this.queued.get(method) ?? [];
    q.push(...answers);
    this.queued.set(method, q);
  }

  private async next<T>(method: string, req: unknown, fallback: () => T, opts?: CallOptions): Promise<T> {
    this.calls.push({ method, req, opts });
    const a = this.queued.get(method)?.shift();
    let v: unknown = a === undefined ? fallback() : a;
    if (typeof v === "function") {
      v = await (v as (r: unknown) => unknown)(req);
    }
    if (v instanceof RpcError) {
      throw v;
    }
    return v as T;
  }

  of(method: string): unknown[] {
    return this.calls.filter((c) => c.method === method).map((c) => c.req);
  }

  pollTasks(req: PollTasksRequest, opts: CallOptions): Promise<PollTasksResponse> {
    this.calls.push({ method: "PollTasks", req });
    const ready = this.polls.shift();
    if (ready !== undefined) {
      return Promise.resolve({ tasks: ready });
    }
    return new Promise((resolve, reject) => {
      this.pendingPoll = (tasks) => resolve({ tasks });
      opts.signal?.addEventListener("abort", () => reject(new RpcError(Code.CANCELLED, "cancelled")), { once: true });
    });
  }

  /** Answers the open poll with `tasks` (or queues them for the next poll). */
  deliver(tasks: Task[]): void {
    const p = this.pendingPoll;
    this.pendingPoll = null;
    if (p === null) {
      this.polls.push(tasks);
    } else {
      p(tasks);
    }
  }

  get polling(): boolean {
    return this.pendingPoll !== null;
  }

  endPolls(req: unknown): Promise<EndPollsResponse> {
    return this.next("EndPolls", req, () => {
      const ended = this.pendingPoll === null ? 0 : 1;
      this.deliver([]);
      if (ended === 0) {
        this.polls.pop();
      }
      return { ended };
    });
  }

  getDefinition(req: { name?: string; version?: string }): Promise<Definition> {
    return this.next<Definition>("GetDefinition", req, (): Definition => {
      const g = this.definitions.get(req.version ?? "");
      if (g === undefined) {
        throw new RpcError(Code.NOT_FOUND, "no such version", "DEFINITION_NOT_FOUND");
      }
      return { name: req.name ?? "", version: req.version ?? "", graph: g, registeredAtMs: 0, nodeCounts: [] };
    });
  }

  heartbeat(req: HeartbeatRequest): Promise<HeartbeatResponse> {
    return this.next("Heartbeat", req, () => {
      const now = Date.now();
      return { leaseExpiresAtMs: now + 60_000, instanceStatus: "RUNNING", serverNowMs: now };
    });
  }

  completeTask(req: CompleteTaskRequest, opts?: CallOptions): Promise<TaskReportResponse> {
    return this.next("CompleteTask", req, () => ({ instanceStatus: "RUNNING", nextTask: null }), opts);
  }

  failTask(req: FailTaskRequest, opts?: CallOptions): Promise<TaskReportResponse> {
    return this.next("FailTask", req, () => ({ instanceStatus: "RUNNING", nextTask: null }), opts);
  }

  releaseTask(req: ReleaseTaskRequest, opts?: CallOptions): Promise<TaskReportResponse> {
    return this.next("ReleaseTask", req, () => ({ instanceStatus: "RUNNING", nextTask: null }), opts);
  }

  advanceRun(req: AdvanceRunRequest, opts?: CallOptions): Promise<AdvanceRunResponse> {
    return this.next(
      "AdvanceRun",
      req,
      () => {
        const now = Date.now();
        return { instanceStatus: "RUNNING", leaseExpiresAtMs: now + 60_000, keepGoing: req.final !== true, serverNowMs: now };
      },
      opts,
    );
  }

  startInstance(req: StartInstanceRequest, opts?: CallOptions): Promise<StartInstanceResponse> {
    return this.next(
      "StartInstance",
      req,
      (): StartInstanceResponse => ({ instanceId: req.instanceId || "i-1", version: req.version || "sha256:0", eagerTask: null, created: true }),
      opts,
    );
  }

  close(): void {
    this.closed = true;
  }

  /** The reports made, in the notation of spec/conformance/localrun/README.md. */
  reports(): string[] {
    const out: string[] = [];
    for (const c of this.calls) {
      const r = c.req as Record<string, unknown>;
      switch (c.method) {
        case "CompleteTask":
          out.push(`complete ${nodeOf(r["taskId"])}`);
          break;
        case "FailTask":
          out.push(`fail ${nodeOf(r["taskId"])}`);
          break;
        case "ReleaseTask":
          out.push(`release ${nodeOf(r["taskId"])} / ${String(r["reason"])}`);
          break;
        case "AdvanceRun": {
          const steps = (r["steps"] as StepResult[]).map(stepNotation).join(" ");
          const head = steps === "" ? "advance" : `advance ${steps}`;
          out.push(r["final"] === true ? `${head} / ${String(r["handbackReason"])}` : head);
          break;
        }
      }
    }
    return out;
  }
}

/** Test tasks are named by their node: task id "<node>" or "<node>#<n>". */
function nodeOf(taskId: unknown): string {
  return String(taskId).split("#")[0] ?? "";
}

function stepNotation(s: StepResult): string {
  if (s.failure != null) {
    return `${s.nodeId ?? ""}!`;
  }
  if (s.predicate !== undefined && s.predicate !== null) {
    return `${s.nodeId ?? ""}=${String(s.predicate)}`;
  }
  return s.nodeId ?? "";
}

/** A task as a server hands it out; `over` replaces fields. */
export function task(over: Partial<Task> = {}): Task {
  const now = Date.now();
  const nodeId = over.nodeId ?? "a";
  return {
    taskId: nodeId,
    lease: "lease-1",
    leaseExpiresAtMs: now + 60_000,
    instanceId: "i-1",
    flow: "f",
    version: "sha256:0",
    nodeId,
    activity: nodeId,
    queue: "default",
    attempt: 1,
    input: Buffer.from("{}"),
    executionMode: "SERVER",
    loopCounts: Buffer.alloc(0),
    timeoutMs: 60_000,
    serverNowMs: now,
    maxPayloadBytes: 0,
    maxRequestBytes: 0,
    traceparent: "",
    tracestate: "",
    ...over,
  };
}

export function core(api: WiggleApi, handlers: Record<string, Handler>, over: Partial<CoreOptions> = {}): Core {
  return new Core(
    api,
    {
      queues: ["default"],
      concurrency: 4,
      localBatchSize: 64,
      workerId: "w-1",
      pollWaitMs: 1_000,
      callTimeoutMs: 1_000,
      drainTimeoutMs: 5_000,
      abortStepsOnDrain: false,
      logger: quiet,
      ...over,
    },
    new Map(Object.entries(handlers)),
  );
}

/**
 * A LOCAL graph running `steps` in order, then `end`, every step a task of `activity` (default:
 * the step's own id) on the queue default: its bytes, as GetDefinition returns them.
 */
export function linearGraph(steps: readonly string[], activity?: string): Buffer {
  const nodes: Record<string, unknown> = { end: { kind: "end" } };
  steps.forEach((id, i) => {
    nodes[id] = {
      kind: "task",
      activity: activity ?? id,
      queue: "default",
      retry: { max_attempts: 3, backoff: "fixed", initial_ms: 100, max_ms: 100 },
      timeout_ms: 60_000,
      next: steps[i + 1] ?? "end",
      checkpoint: false,
    };
  });
  return Buffer.from(JSON.stringify({ format: 1, name: "f", execution: "DEFAULT", input: null, start: steps[0], nodes }));
}

/** Resolves once `check` holds, polling the event loop; throws after `ms`. */
export async function until(what: string, check: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) {
      throw new Error(`${what}: not within ${ms} ms`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}
