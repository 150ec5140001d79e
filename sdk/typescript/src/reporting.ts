/**
 * A worker's reports to the server: a SERVER step's CompleteTask or FailTask, a release, a
 * heartbeat, and the resending of a report whose fate is unknown, under the same seq, for as
 * long as its lease lasts (docs/worker-protocol.md, "Reports"). The poll loop and the drain are
 * in core.ts, local runs in local-run.ts, the batching of concurrent reports in batching.ts.
 */
import type { Outcome } from "./activity.js";
import type { ReportBatcher } from "./batching.js";
import type { Lease } from "./lease.js";
import type { Logger } from "./log.js";
import {
  Backoff,
  Code,
  leaseLost,
  type Outage,
  resendable,
  RpcError,
  sleep,
  type CallOptions,
  type Task,
  unanswered,
} from "./rpc.js";

/** The worker's settings a reporter reads. */
export interface ReportingOptions {
  readonly workerId: string;
  readonly queues: readonly string[];
  readonly callTimeoutMs: number;
}

/** The worker's state a reporter reads, as it is at each report. */
export interface ReportingState {
  readonly draining: boolean;
  /** Every registered activity, sorted: what CompleteTask's `next` lists. */
  readonly activities: string[];
}

export class Reporter {
  constructor(
    private readonly api: ReportBatcher,
    private readonly opts: ReportingOptions,
    private readonly log: Logger,
    private readonly outage: Outage,
    /** Aborted when the worker stops without finishing: no report is sent or resent then. */
    private readonly abortSignal: AbortSignal,
    private readonly state: ReportingState,
  ) {}

  /**
   * Reports one step with CompleteTask or FailTask; with `wantNext` (and not draining)
   * CompleteTask asks for the instance's next task, which it returns.
   */
  async reportSingle(t: Task, lease: Lease, out: Outcome, wantNext: boolean): Promise<Task | null> {
    const why = lease.lost;
    if (why !== "") {
      this.log.info("task dropped", { task: t.taskId, why });
      return null;
    }
    const seq = lease.nextSeq();
    let next: Task | null = null;
    try {
      if (out.kind === "failure") {
        await this.report(lease, (o) =>
          this.api.failTask({ taskId: t.taskId, lease: t.lease, failure: out.failure, seq }, o),
        );
      } else {
        const result = out.kind === "context" ? out.json : Buffer.from(String(out.value));
        const resp = await this.report(lease, (o) =>
          this.api.completeTask(
            {
              taskId: t.taskId,
              lease: t.lease,
              result,
              seq,
              next: wantNext && !this.state.draining ? this.eagerDispatch() : null,
            },
            o,
          ),
        );
        const n = resp.nextTask;
        next = n !== null && n !== undefined && n.taskId !== "" ? n : null;
      }
    } catch (e) {
      await this.refused("report", t, lease, RpcError.of(e));
      return null;
    }
    lease.applied(seq);
    return next;
  }

  /** What CompleteTask's `next` carries for this worker. */
  eagerDispatch(): { workerId: string; queues: string[]; activities: string[] } {
    return { workerId: this.opts.workerId, queues: [...this.opts.queues], activities: this.state.activities };
  }

  /**
   * A report the server did not apply: quietly dropped when the task is simply not ours any
   * more; otherwise the lease may still be ours, so the task is released at once (the refused
   * report's seq is still free) rather than left to expire.
   */
  async refused(what: string, t: Task, lease: Lease, e: RpcError): Promise<void> {
    if (leaseLost(e)) {
      this.log.info(`${what} refused: the lease is not ours`, { task: t.taskId, err: e.message });
      return;
    }
    if (this.abortSignal.aborted) {
      return; // the worker gave up draining: behave like a crash
    }
    if (unanswered(e)) {
      // Its fate stayed unknown for the whole lease: another report under its seq (a release)
      // may not follow it, and the server is unreachable anyway. The lease expires there.
      this.log.error(`${what} not delivered within its lease`, { task: t.taskId, err: e.message });
      return;
    }
    this.log.error(`${what} refused`, { task: t.taskId, code: e.code, err: e.message });
    await this.release(t, lease, "report refused");
  }

  /** Gives a leased task back without a result: READY again at the same attempt. */
  async release(t: Task, lease: Lease, reason: string): Promise<void> {
    const seq = lease.nextSeq();
    try {
      await this.report(lease, (o) =>
        this.api.releaseTask({ taskId: t.taskId, lease: t.lease, seq, reason }, o),
      );
      lease.applied(seq);
      this.log.info("task released", { task: t.taskId, reason });
    } catch (e) {
      const err = RpcError.of(e);
      if (err.code === Code.UNIMPLEMENTED) {
        this.log.info("the server cannot release tasks; the lease will expire", { task: t.taskId });
      } else {
        this.log.info("release refused", { task: t.taskId, err: err.message });
      }
    }
  }

  /**
   * Sends a report, resending it unchanged while its fate is unknown, for as long as the lease
   * lasts (at least a second): past its end the task belongs to someone else. One attempt
   * never outlives the lease by much, so a hung call leaves time to resend.
   */
  async report<T>(lease: Lease, send: (o: CallOptions) => Promise<T>): Promise<T> {
    const giveUp = Date.now() + Math.max(1_000, lease.remainingMs());
    const backoff = new Backoff();
    for (;;) {
      try {
        const timeoutMs = Math.min(this.opts.callTimeoutMs, Math.max(2_000, lease.remainingMs()));
        const resp = await send({ timeoutMs, signal: this.abortSignal });
        this.outage.succeeded();
        return resp;
      } catch (e) {
        const err = RpcError.of(e);
        if (!resendable(err) || this.abortSignal.aborted) {
          throw err;
        }
        this.outage.failed(err);
        const d = backoff.next();
        if (Date.now() + d > giveUp || !(await sleep(d, this.abortSignal))) {
          throw err;
        }
      }
    }
  }

  /**
   * Heartbeats `lease` once, naming the step running now. An unreachable server is not fatal:
   * the next beat comes sooner, and a local run's budget check notices a deadline coming close.
   * A refusal other than a lost lease is logged once per lease; the beats keep their cadence.
   */
  async beat(lease: Lease): Promise<void> {
    const { length, node, nodeLength } = lease;
    try {
      const resp = await this.api.heartbeat(
        { taskId: lease.taskId, lease: lease.token, nodeId: node },
        { timeoutMs: Math.max(1_000, length / 3), signal: this.abortSignal },
      );
      if (resp.instanceStatus !== "RUNNING") {
        lease.lose(`instance is ${resp.instanceStatus}`);
        return;
      }
      lease.renewed(resp.leaseExpiresAtMs, resp.serverNowMs, nodeLength);
    } catch (e) {
      const err = RpcError.of(e);
      if (leaseLost(err)) {
        lease.lose(`heartbeat refused: ${err.message}`);
        return;
      }
      if (!unanswered(err) && !lease.warned) {
        lease.warned = true;
        this.log.warn("heartbeat failed", { task: lease.taskId, err: err.message });
      }
      lease.beatFailed(resendable(err));
    }
  }
}
