/**
 * One local run, from a leased task to its handback (docs/worker-protocol.md, "Local runs";
 * vectors in spec/conformance/localrun/).
 *
 * It starts at the leased node and keeps running nodes itself while the handback rule says the
 * next node is a step this worker may run, reporting through AdvanceRun: after every step in
 * LOCAL_SYNC; in LOCAL_ASYNC at the handback, right after a checkpoint step, whenever the batch
 * size is buffered, and before a result would push the request over the server's limit.
 * Between steps it checks whether the lease was lost (abandon: the server would refuse the
 * results), whether the worker drains (hand back, `shutdown`), whether enough lease is left
 * (`lease_budget`), and whether it has the next step's activity (`unknown_activity`).
 *
 * What a crash costs follows from when results reach the server: one step in LOCAL_SYNC,
 * everything buffered since the last flush in LOCAL_ASYNC.
 */
import type { Outcome } from "./activity.js";
import type { RunHost } from "./run-host.js";
import type { evaluateNode } from "./expression-nodes.js";
import { isExpressionNode, stepActivity, stepTimeoutMs, type ExecutionMode, type Graph, type GraphNode } from "./graph.js";
import type { Lease } from "./lease.js";
import { defaultMaxRequestBytes, DEFAULT_MAX_PAYLOAD_BYTES, flushAfter, overRequestLimit } from "./policy.js";
import { Code, RpcError, type AdvanceRunResponse, type StepResult, type Task } from "./rpc.js";
import { advance, leaseBudgetLeft, type Handback, type LoopCounts } from "./traversal.js";
import { stepSpanId } from "./tracecontext.js";

/**
 * The CEL evaluator, loaded when a run first reaches an expression node: `@bufbuild/cel` takes
 * about 0.2 s of CPU to load, more than the rest of the worker, and most runs (and many whole
 * workers) never evaluate an expression.
 */
let evaluator: Promise<typeof evaluateNode> | undefined;
function loadEvaluator(): Promise<typeof evaluateNode> {
  evaluator ??= import("./expression-nodes.js").then((m) => m.evaluateNode);
  return evaluator;
}

/** A buffered result and its encoded size as an AdvanceRunRequest.steps entry. */
interface Buffered {
  readonly result: StepResult;
  readonly outcome: Outcome;
  readonly bytes: number;
  /** An expression node's result: not counted toward the batch size. */
  readonly expression: boolean;
}

/** Why a run stopped without a final report: the lease is lost, or the worker gave up. */
const ABANDON = Symbol("abandon");

export class LocalRun {
  private readonly mode: ExecutionMode;
  private buffer: Buffered[] = [];
  private flushes = 0;
  /** Why the run ended, for logs and tests. */
  handback = "";
  /** The timeout of the node a non-final flush moves the token to. */
  private nextTimeoutMs = 0;

  constructor(
    private readonly core: RunHost,
    private readonly task: Task,
    private readonly graph: Graph,
    private readonly lease: Lease,
  ) {
    this.mode = task.executionMode === "LOCAL_SYNC" ? "LOCAL_SYNC" : "LOCAL_ASYNC";
  }

  async run(): Promise<void> {
    const { task: t, graph: g, core } = this;
    let nodeId = t.nodeId;
    let activity = t.activity;
    let attempt = t.attempt;
    let input: Uint8Array = t.input;
    let loopCounts = readLoopCounts(t, core);
    let position = 0; // the step's place in the run, and the span before it (tracing)
    let previous = "";
    for (;;) {
      const node = g.nodes.get(nodeId) as GraphNode;
      const isPredicate = node.kind === "predicate";
      const step = core.stepOf(t, nodeId, activity, attempt, this.mode, this.lease);
      let out: Outcome;
      if (core.tracing) {
        const span = { task: t, nodeId, activity, attempt, mode: this.mode, loops: loopCounts, position, previous };
        out = await core.run(step, input, isPredicate, span);
        previous = stepSpanId(t.instanceId, t.taskId, nodeId, attempt, loopCounts);
        position++;
      } else {
        out = await core.run(step, input, isPredicate);
      }
      const lost = this.lease.lost;
      if (lost !== "") {
        // Lost while the step ran: no report may follow, neither a flush of what was buffered
        // before it nor a final one (docs/worker-protocol.md, "Lost lease and the loop").
        core.log.info("local run ends", { task: t.taskId, why: lost });
        this.handback = "not_running";
        return;
      }
      if (out.kind === "failure" && out.interrupted === true) {
        // The handler gave up because the worker drains: hand back before this step.
        await this.finish("shutdown");
        return;
      }
      if (out.kind !== "predicate") {
        out = core.limited(out, t);
      }
      // A failure, or no boolean at a predicate (its value goes as a context, and the server
      // fails the step as it fails a SERVER-mode CompleteTask): the run ends here.
      const ends = out.kind === "failure" || (isPredicate && out.kind !== "predicate");
      const entry = this.entry(nodeId, out);
      if (this.buffer.length > 0 && this.overLimit(entry)) {
        this.nextTimeoutMs = stepTimeoutMs(node);
        const resp = await this.flush(false, null);
        if (resp === null || !resp.keepGoing) {
          return;
        }
      }
      this.buffer.push(entry);
      if (ends) {
        // The successful prefix and the failure go together, so the server applies the prefix
        // and then the step's retry policy in one transaction.
        await this.finish("step_failed");
        return;
      }
      let move = advance(
        g,
        nodeId,
        core.opts.queues,
        out.kind === "predicate" ? out.value : null,
        loopCounts,
      );
      if (!isPredicate && out.kind === "context") {
        input = out.json; // a predicate leaves the context as it was
      }
      // Expression nodes are evaluated here and travel with the step before them: never
      // flushed alone, never a reason to hand back (docs/worker-protocol.md, W32).
      const instance = { id: t.instanceId, flow: t.flow };
      for (;;) {
        const at = move.handback === null && move.next !== null ? g.nodes.get(move.next) : undefined;
        if (at === undefined || !this.chainsThrough(at)) {
          break;
        }
        let value = (await loadEvaluator())(at, input, instance);
        if (value.kind === "context") {
          value = core.limited(value, t);
        }
        const result = this.stepResult(at.id, value);
        this.buffer.push({ result, outcome: value, bytes: stepEntryBytes(result), expression: true });
        if (value.kind === "failure") {
          await this.finish("step_failed");
          return;
        }
        if (value.kind === "context") {
          input = value.json;
        }
        move = advance(g, at.id, core.opts.queues, value.kind === "predicate" ? value.value : null, move.loopCounts);
      }
      let reason: Handback | null = move.handback;
      const next = move.next === null ? undefined : g.nodes.get(move.next);
      if (reason === null && next !== undefined) {
        const why = await this.betweenSteps(next);
        if (why === ABANDON) {
          return;
        }
        reason = why;
      }
      if (reason !== null || next === undefined) {
        await this.finish(reason ?? "end");
        return;
      }
      if (this.flushDue(node)) {
        this.nextTimeoutMs = stepTimeoutMs(next);
        const resp = await this.flush(false, null);
        if (resp === null || !resp.keepGoing) {
          return;
        }
      }
      nodeId = next.id;
      activity = stepActivity(next);
      attempt = 1;
      loopCounts = move.loopCounts;
    }
  }

  /** Whether the run evaluates `node` itself and goes on past it: a condition or set node
   * (W32). A method, so that the negative controls can break the rule. */
  chainsThrough(node: GraphNode): boolean {
    return isExpressionNode(node);
  }

  /** Whether the run, going on past `node`, flushes its buffer now (see policy.ts). */
  flushDue(node: GraphNode): boolean {
    const workerSteps = this.buffer.filter((b) => !b.expression).length;
    return flushAfter(this.mode, node, workerSteps, this.core.opts.localBatchSize);
  }

  /**
   * Why not to start the next step: a fallback another run discovered, a drain, a spent lease
   * budget, an activity this worker lacks; ABANDON when the lease is lost or the worker gave
   * up. A next step with a longer timeout than the lease's length is announced first by a
   * heartbeat naming it, so the server renews the lease by that timeout.
   */
  private async betweenSteps(next: GraphNode): Promise<Handback | null | typeof ABANDON> {
    const { core, lease } = this;
    let why = lease.lost;
    if (why !== "") {
      core.log.info("local run abandoned", { task: this.task.taskId, why });
      this.handback = "not_running";
      return ABANDON;
    }
    if (core.abortSignal.aborted) {
      this.handback = "aborted";
      return ABANDON;
    }
    if (core.advanceRun < 0 && this.flushes === 0) {
      return "fallback" as Handback; // never sent: the first step goes as CompleteTask
    }
    if (core.draining) {
      return "shutdown";
    }
    const timeout = stepTimeoutMs(next);
    lease.at(next.id, timeout);
    if (timeout > lease.length) {
      await lease.beatNow();
      why = lease.lost;
      if (why !== "") {
        this.handback = "not_running";
        return ABANDON;
      }
    }
    if (!leaseBudgetLeft(lease.remainingMs(), lease.length)) {
      return "lease_budget";
    }
    if (!core.handlers.has(stepActivity(next))) {
      return "unknown_activity";
    }
    return null;
  }

  /** A step's result as AdvanceRun carries it, with its encoded size. */
  private entry(nodeId: string, out: Outcome): Buffered {
    const result = this.stepResult(nodeId, out);
    return { result, outcome: out, bytes: stepEntryBytes(result), expression: false };
  }

  /** A step's outcome as the wire's StepResult. */
  stepResult(nodeId: string, out: Outcome): StepResult {
    switch (out.kind) {
      case "failure":
        return { nodeId, failure: out.failure };
      case "predicate":
        return { nodeId, predicate: out.value };
      case "context":
        return { nodeId, context: out.json };
    }
  }

  /**
   * Whether adding `entry` to the buffer would push the AdvanceRun over the server's request
   * limit (LOCAL_ASYNC: a LOCAL_SYNC buffer is empty here). The size is the protobuf
   * encoding's of {task_id, lease, steps}, as every SDK computes it.
   */
  overLimit(entry: Buffered): boolean {
    let limit = this.task.maxRequestBytes;
    if (limit <= 0) {
      const payload = this.task.maxPayloadBytes > 0 ? this.task.maxPayloadBytes : DEFAULT_MAX_PAYLOAD_BYTES;
      limit = defaultMaxRequestBytes(payload);
    }
    let size = headerBytes(this.task.taskId, this.task.lease) + entry.bytes;
    for (const b of this.buffer) {
      size += b.bytes;
    }
    return overRequestLimit(size, limit);
  }

  private async finish(reason: Handback): Promise<void> {
    this.handback = reason;
    await this.flush(true, reason);
  }

  /** Sends the buffer; null when the run must stop (refused, not RUNNING, fallen back). */
  private async flush(final: boolean, reason: Handback | null): Promise<AdvanceRunResponse | null> {
    const { core, lease, task: t } = this;
    if (core.advanceRun < 0 && this.flushes === 0) {
      await this.fallBack(); // another run found out the server has no AdvanceRun
      return null;
    }
    if (lease.lost !== "" && !final) {
      this.handback = "not_running";
      return null; // a final report it computed may still go; nothing else may
    }
    const seq = lease.nextSeq();
    const steps = this.buffer.map((b) => b.result);
    let resp: AdvanceRunResponse;
    try {
      resp = await core.reporter.report(lease, (o) =>
        core.api.advanceRun(
          { taskId: t.taskId, lease: t.lease, steps, final, handbackReason: reason ?? "", seq },
          o,
        ),
      );
    } catch (e) {
      await this.refused(RpcError.of(e));
      return null;
    }
    lease.applied(seq);
    this.flushes++;
    this.buffer = [];
    core.advanceRun = 1;
    if (resp.instanceStatus !== "RUNNING") {
      if (this.handback === "") {
        this.handback = "not_running";
      }
      return null;
    }
    if (!final) {
      // The server moved the token on and leased it for the next node's timeout.
      lease.renewed(resp.leaseExpiresAtMs, resp.serverNowMs, this.nextTimeoutMs);
    }
    return resp;
  }

  private async refused(e: RpcError): Promise<void> {
    const { core } = this;
    if (e.code === Code.UNIMPLEMENTED && this.flushes === 0) {
      // An older server: report the first step the SERVER way (the lease is the task's), and
      // run every later task as a SERVER step. The rest of the buffer is dropped: those steps
      // run again as SERVER tasks, within LOCAL_ASYNC's at-least-once contract.
      if (core.advanceRun !== -1) {
        core.advanceRun = -1;
        core.log.warn("the server does not implement AdvanceRun; running tasks in SERVER mode");
      }
      await this.fallBack();
      return;
    }
    if (this.handback === "") {
      this.handback = "refused";
    }
    await core.reporter.refused("AdvanceRun", this.task, this.lease, e);
  }

  /** Reports the first buffered step with CompleteTask / FailTask, as in SERVER mode. */
  private async fallBack(): Promise<void> {
    const first = this.buffer[0];
    this.buffer = [];
    this.handback = "fallback";
    if (first !== undefined) {
      await this.core.reporter.reportSingle(this.task, this.lease, first.outcome, false);
    }
  }
}

export function readLoopCounts(t: Task, core: Pick<RunHost, "log">): LoopCounts {
  if (t.loopCounts.length === 0) {
    return {};
  }
  try {
    const v: unknown = JSON.parse(Buffer.from(t.loopCounts).toString("utf8"));
    if (typeof v === "object" && v !== null && !Array.isArray(v)) {
      return v as LoopCounts;
    }
  } catch {
    // fall through
  }
  core.log.warn("task has unreadable loop counts; treating them as empty", { task: t.taskId });
  return {};
}

// ---- protobuf sizes ------------------------------------------------------------------------

function varintBytes(n: number): number {
  let bytes = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    bytes++;
  }
  return bytes;
}

/** A length-delimited field (tags below 16: one byte of key). */
function fieldBytes(_tag: number, length: number): number {
  return 1 + varintBytes(length) + length;
}

/** A proto3 string field: absent when empty. */
function stringFieldBytes(tag: number, s: string | undefined): number {
  if (s === undefined || s === "") {
    return 0;
  }
  return fieldBytes(tag, Buffer.byteLength(s, "utf8"));
}

/** The encoded size of an AdvanceRunRequest's task_id and lease. */
export function headerBytes(taskId: string, lease: string): number {
  return stringFieldBytes(1, taskId) + stringFieldBytes(2, lease);
}

/** The encoded size of one AdvanceRunRequest.steps entry. */
export function stepEntryBytes(r: StepResult): number {
  return fieldBytes(3, stepResultBytes(r));
}

/** The encoded size of a StepResult (oneof members are present even at their default). */
export function stepResultBytes(r: StepResult): number {
  let size = stringFieldBytes(1, r.nodeId);
  if (r.failure != null) {
    const f = r.failure;
    const inner = stringFieldBytes(1, f.message) + (f.nonRetryable === true ? 2 : 0) + stringFieldBytes(3, f.errorType);
    size += fieldBytes(4, inner);
  } else if (r.predicate !== undefined) {
    size += 2;
  } else if (r.context !== undefined) {
    size += fieldBytes(2, typeof r.context === "string" ? Buffer.byteLength(r.context) : r.context.length);
  }
  return size;
}
