/**
 * One leased task: its fencing token, when it runs out, the step running under it, the reports
 * applied under it, and its heartbeats.
 *
 * Times: the server states expiries on its own clock with that clock's reading
 * (`server_now_ms`); what is left is anchored at this process's monotonic clock when the answer
 * arrived (docs/worker-protocol.md, "Clocks"), so no synced clocks are needed.
 */
import { performance } from "node:perf_hooks";

import type { Task } from "./rpc.js";
import { LeaseLostError } from "./step.js";

const now = (): number => performance.now();

export class Lease {
  readonly taskId: string;
  readonly token: string;
  /** Aborted when the lease is lost, or the worker stops: handlers get its signal. */
  readonly controller = new AbortController();
  /** The timeout the lease was last renewed for (ms). */
  length: number;
  /** The step running now, which heartbeats name, and its timeout. */
  node: string;
  nodeLength: number;
  private deadline = 0;
  /** When the heartbeat cadence counts from: the last renewal, or the last refused beat. */
  private beatBase = 0;
  private lostWhy = "";
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | null = null;
  private beatFn: ((lease: Lease) => Promise<void>) | null = null;
  private stopped = false;
  private readonly unlisten: (() => void)[] = [];
  /** A failed heartbeat was logged: once per lease, a broken server would flood the log. */
  warned = false;

  constructor(task: Task) {
    this.taskId = task.taskId;
    this.token = task.lease;
    this.length = task.timeoutMs > 0 ? task.timeoutMs : 60_000;
    this.node = task.nodeId;
    this.nodeLength = this.length;
    this.renewed(task.leaseExpiresAtMs, task.serverNowMs, 0);
  }

  /** Aborts the handlers' signal when `signal` aborts (the worker stops), until {@link stop}. */
  follow(signal: AbortSignal): void {
    if (signal.aborted) {
      this.controller.abort(signal.reason);
      return;
    }
    const onAbort = (): void => this.controller.abort(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    this.unlisten.push(() => signal.removeEventListener("abort", onAbort));
  }

  /**
   * Records a renewal: the expiry and the server's clock when it answered, in ms (serverNowMs 0:
   * an older server; this host's wall clock stands in, and a nonsense expiry falls back to one
   * lease length). `length` is the lease's new length (0: as it was).
   */
  renewed(expiresAtMs: number, serverNowMs: number, length: number): void {
    const t = now();
    if (length > 0) {
      this.length = length;
    }
    let left: number;
    if (expiresAtMs <= 0) {
      left = this.length;
    } else if (serverNowMs > 0) {
      left = expiresAtMs - serverNowMs;
    } else {
      left = expiresAtMs - Date.now();
      if (left <= 0 || left > 10 * this.length) {
        left = this.length;
      }
    }
    this.deadline = t + left;
    this.beatBase = t;
    this.schedule(); // a renewal for a shorter step brings the next heartbeat forward
  }

  /** Records the step running now and its timeout, which the next heartbeat names. */
  at(node: string, timeoutMs: number): void {
    this.node = node;
    this.nodeLength = timeoutMs;
  }

  lose(why: string): void {
    if (this.lostWhy !== "") {
      return;
    }
    this.lostWhy = why;
    this.clearTimer();
    this.controller.abort(new LeaseLostError(why));
  }

  /** Why the lease was lost, "" while it is held (its expiry passing loses it too). */
  get lost(): string {
    if (this.lostWhy === "" && now() > this.deadline) {
      return "the lease expired";
    }
    return this.lostWhy;
  }

  remainingMs(): number {
    return this.deadline - now();
  }

  /** The seq of the next report: one past the last the server applied. */
  nextSeq(): number {
    return this.seq + 1;
  }

  applied(seq: number): void {
    this.seq = Math.max(this.seq, seq);
  }

  /** Starts heartbeating with `beat` whenever one falls due, until {@link stop}. */
  keepAlive(beat: (lease: Lease) => Promise<void>): void {
    this.beatFn = beat;
    this.schedule();
  }

  /** Heartbeats now, or joins the heartbeat already in flight. */
  beatNow(): Promise<void> {
    if (this.beatFn === null) {
      return Promise.resolve();
    }
    if (this.beating === null) {
      const fn = this.beatFn;
      this.beating = fn(this).finally(() => {
        this.beating = null;
        this.schedule();
      });
    }
    return this.beating;
  }

  /**
   * After a heartbeat that renewed nothing. One answered by the "back off" kind (no answer, a
   * server fault) is tried again within min(1 s, length / 6), so one lost heartbeat never costs
   * the lease; after a fatal answer the next comes at the usual cadence, a third of the lease
   * later, not faster.
   */
  beatFailed(backOff: boolean): void {
    const t = now();
    this.beatBase = backOff ? t - this.length / 3 + Math.min(1_000, this.length / 6) : t;
  }

  /** The run is over: no more heartbeats, no more listening. */
  stop(): void {
    this.stopped = true;
    this.clearTimer();
    for (const f of this.unlisten.splice(0)) {
      f();
    }
  }

  private clearTimer(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  /** A heartbeat falls due a third of the lease after the last renewal. */
  private schedule(): void {
    this.clearTimer();
    if (this.beatFn === null || this.stopped || this.lostWhy !== "" || this.beating !== null) {
      return;
    }
    const wait = Math.max(0, this.beatBase + this.length / 3 - now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.stopped && this.lost === "") {
        void this.beatNow();
      }
    }, wait);
  }
}
