/**
 * Reports of concurrent tasks sent together: one ReportBatch call carries many
 * (docs/worker-protocol.md, "Batched reports").
 *
 * A worker running many tasks at once reports each step (SERVER: every CompleteTask; LOCAL_SYNC:
 * every step before the next runs), and most of a report's cost, on both sides, is the call
 * itself. So one batch is in flight at a time, and the reports made meanwhile go together in
 * the next. A lone report is sent at once: batching never delays the first report, it only
 * groups the ones that would otherwise each wait for a round trip.
 *
 * {@link ReportBatcher} wraps the worker's {@link WiggleApi}: each report's caller gets exactly
 * what the report's own RPC would have given it, its answer or an {@link RpcError} with that
 * RPC's status and `wiggle-error-code`, so resends (same seq) and refusals do not know batching
 * exists. A server without ReportBatch (UNIMPLEMENTED) turns batching off for good: each report
 * goes alone again. Two reports of one lease never meet in a batch, since a worker sends a
 * lease's next report only after the previous one was answered.
 */
import type { Logger } from "./log.js";
import {
  Code,
  REPORT_RPCS,
  reportBytes,
  RpcError,
  type AdvanceRunRequest,
  type AdvanceRunResponse,
  type CallOptions,
  type CompleteTaskRequest,
  type Definition,
  type EndPollsRequest,
  type EndPollsResponse,
  type FailTaskRequest,
  type GetDefinitionRequest,
  type HeartbeatRequest,
  type HeartbeatResponse,
  type PollTasksRequest,
  type PollTasksResponse,
  type ReleaseTaskRequest,
  type ReportBatchRequest,
  type ReportBatchResponse,
  type ReportKind,
  type TaskReportAnswer,
  type TaskReportResponse,
  type WiggleApi,
} from "./rpc.js";

/** A batch is split before it would exceed this many bytes, or the server's request limit when
 * a task said it is smaller (a report over it travels alone). */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;
/** The most reports in one batch. */
export const MAX_BATCH_REPORTS = 256;

/** One report waiting for its answer. */
interface Pending {
  readonly kind: ReportKind;
  readonly req: unknown;
  readonly opts: CallOptions;
  settled: boolean;
  settle(answer: unknown): void;
}

export class ReportBatcher implements WiggleApi {
  /** False once the server answered ReportBatch UNIMPLEMENTED (or has none): reports go alone. */
  enabled: boolean;
  /** No batch grows past this many bytes. */
  maxBytes = MAX_BATCH_BYTES;
  /** ReportBatch calls made (for tests). */
  calls = 0;
  private queue: Pending[] = [];
  private sending = false;

  constructor(
    private readonly api: WiggleApi,
    private readonly log: Logger,
  ) {
    this.enabled = api.reportBatch !== undefined;
  }

  /** The server's request limit, as a task carried it: no batch is built larger. */
  noteLimit(maxRequestBytes: number): void {
    if (maxRequestBytes > 0 && maxRequestBytes < this.maxBytes) {
      this.maxBytes = maxRequestBytes;
    }
  }

  // ---- the reports ---------------------------------------------------------------------

  async completeTask(req: CompleteTaskRequest, opts: CallOptions): Promise<TaskReportResponse> {
    const resp = await this.submit<TaskReportResponse>("complete", req, opts);
    this.noteLimit(resp.nextTask?.maxRequestBytes ?? 0);
    return resp;
  }
  failTask(req: FailTaskRequest, opts: CallOptions): Promise<TaskReportResponse> {
    return this.submit("fail", req, opts);
  }
  releaseTask(req: ReleaseTaskRequest, opts: CallOptions): Promise<TaskReportResponse> {
    return this.submit("release", req, opts);
  }
  advanceRun(req: AdvanceRunRequest, opts: CallOptions): Promise<AdvanceRunResponse> {
    return this.submit("advance", req, opts);
  }

  // ---- everything else goes straight through ---------------------------------------------

  async pollTasks(req: PollTasksRequest, opts: CallOptions): Promise<PollTasksResponse> {
    const resp = await this.api.pollTasks(req, opts);
    for (const t of resp.tasks) {
      this.noteLimit(t.maxRequestBytes);
    }
    return resp;
  }
  endPolls(req: EndPollsRequest, opts: CallOptions): Promise<EndPollsResponse> {
    return this.api.endPolls(req, opts);
  }
  getDefinition(req: GetDefinitionRequest, opts: CallOptions): Promise<Definition> {
    return this.api.getDefinition(req, opts);
  }
  heartbeat(req: HeartbeatRequest, opts: CallOptions): Promise<HeartbeatResponse> {
    return this.api.heartbeat(req, opts);
  }
  close(): void {
    this.api.close();
  }

  // ---- batching ----------------------------------------------------------------------------

  /** The answer to report `req`, or its own RPC's error; sent in the next batch. */
  private submit<T>(kind: ReportKind, req: unknown, opts: CallOptions): Promise<T> {
    if (!this.enabled) {
      return this.alone(kind, req, opts) as Promise<T>;
    }
    return new Promise<T>((resolve, reject) => {
      const signal = opts.signal;
      const onAbort = (): void => p.settle(new RpcError(Code.CANCELLED, "cancelled"));
      const p: Pending = {
        kind,
        req,
        opts,
        settled: false,
        settle(answer: unknown): void {
          if (p.settled) {
            return;
          }
          p.settled = true;
          signal?.removeEventListener("abort", onAbort);
          if (answer instanceof Error) {
            reject(answer);
          } else {
            resolve(answer as T);
          }
        },
      };
      if (signal?.aborted === true) {
        onAbort();
        return;
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      this.queue.push(p);
      if (!this.sending) {
        void this.pump();
      }
    });
  }

  /** Sends what is queued, one batch at a time, until nothing is. A lone report goes at once. */
  private async pump(): Promise<void> {
    this.sending = true;
    try {
      while (this.queue.length > 0) {
        const items = this.queue.splice(0, MAX_BATCH_REPORTS).filter((p) => !p.settled);
        try {
          for (const chunk of this.chunks(items)) {
            await this.send(chunk);
          }
        } catch (e) {
          // A bug of ours (a request that does not encode, say): its own RPC would have failed
          // the same way; no report may be left waiting for an answer.
          const err = new RpcError(Code.INTERNAL, `ReportBatch not sent: ${String(e)}`);
          items.forEach((p) => p.settle(err));
        }
      }
    } finally {
      this.sending = false;
    }
  }

  /** `items` split so that no ReportBatch request exceeds {@link maxBytes}. */
  private chunks(items: Pending[]): Pending[][] {
    if (items.length <= 1) {
      return items.length === 0 ? [] : [items]; // a lone report is not measured
    }
    const out: Pending[][] = [];
    let chunk: Pending[] = [];
    let size = 0;
    for (const p of items) {
      // A TaskReport wraps the request in one more field: two levels of tag and length.
      const weight = entryBytes(entryBytes(reportBytes(p.kind, p.req)));
      if (chunk.length > 0 && size + weight > this.maxBytes) {
        out.push(chunk);
        chunk = [];
        size = 0;
      }
      chunk.push(p);
      size += weight;
    }
    out.push(chunk);
    return out;
  }

  /** One ReportBatch call; every report in it gets its own answer. */
  private async send(items: Pending[]): Promise<void> {
    const live = items.filter((p) => !p.settled);
    if (!this.enabled) {
      live.forEach((p) => this.sendAlone(p)); // an earlier batch found no ReportBatch
      return;
    }
    if (live.length === 0) {
      return;
    }
    // The call is cancelled only when every report in it was (each caller's signal).
    const cancel = new AbortController();
    const onAbort = (): void => {
      if (live.every((p) => p.settled)) {
        cancel.abort();
      }
    };
    for (const p of live) {
      p.opts.signal?.addEventListener("abort", onAbort, { once: true });
    }
    const req: ReportBatchRequest = { reports: live.map((p) => ({ [p.kind]: p.req })) };
    let resp: ReportBatchResponse;
    try {
      this.calls++;
      resp = await (this.api.reportBatch as NonNullable<WiggleApi["reportBatch"]>)(req, {
        timeoutMs: Math.min(...live.map((p) => p.opts.timeoutMs)),
        signal: cancel.signal,
      });
    } catch (e) {
      const err = RpcError.of(e);
      if (err.code === Code.RESOURCE_EXHAUSTED && live.length > 1) {
        // Too big together (the limit was not known yet): one report's size must not spoil
        // the others; each goes alone in a batch of its own and gets its own answer.
        for (const p of live) {
          await this.send([p]);
        }
      } else if (err.code === Code.UNIMPLEMENTED) {
        if (this.enabled) {
          this.enabled = false;
          this.log.info("the server does not implement ReportBatch; reporting one call each");
        }
        live.forEach((p) => this.sendAlone(p));
      } else {
        // The call as a whole failed (transport, deadline, authentication): every report in it
        // gets that answer, and a report of unknown fate is resent by its caller, same seq.
        live.forEach((p) => p.settle(err));
      }
      return;
    } finally {
      for (const p of live) {
        p.opts.signal?.removeEventListener("abort", onAbort);
      }
    }
    const answers = resp.answers;
    if (answers.length !== live.length) {
      const broken = new RpcError(Code.INTERNAL, `ReportBatch answered ${answers.length} reports for ${live.length} sent`);
      live.forEach((p) => p.settle(broken));
      return;
    }
    live.forEach((p, i) => p.settle(unpack(p.kind, answers[i] as TaskReportAnswer)));
  }

  private sendAlone(p: Pending): void {
    this.alone(p.kind, p.req, p.opts).then(
      (v) => p.settle(v),
      (e: unknown) => p.settle(RpcError.of(e)),
    );
  }

  /** Report `req` with its own RPC. */
  private alone(kind: ReportKind, req: unknown, opts: CallOptions): Promise<unknown> {
    switch (kind) {
      case "complete":
        return this.api.completeTask(req as CompleteTaskRequest, opts);
      case "fail":
        return this.api.failTask(req as FailTaskRequest, opts);
      case "advance":
        return this.api.advanceRun(req as AdvanceRunRequest, opts);
      case "release":
        return this.api.releaseTask(req as ReleaseTaskRequest, opts);
    }
  }
}

/** What a report's own RPC would have answered: its response, or its error. */
function unpack(kind: ReportKind, a: TaskReportAnswer): unknown {
  const which = a.answer ?? (a.error != null ? "error" : a.advance != null ? "advance" : a.task != null ? "task" : undefined);
  if (which === "error" && a.error != null) {
    return new RpcError(a.error.statusCode, a.error.message, a.error.errorCode);
  }
  if (kind === "advance" ? which === "advance" && a.advance != null : which === "task" && a.task != null) {
    return kind === "advance" ? a.advance : a.task;
  }
  return new RpcError(Code.INTERNAL, `ReportBatch answered a ${REPORT_RPCS[kind]} with ${which ?? "nothing"}`);
}

/** What a message of `size` bytes costs inside a repeated or message field: tag, length, body. */
function entryBytes(size: number): number {
  let varint = 1;
  while (size >= 2 ** (7 * varint)) {
    varint++;
  }
  return 1 + varint + size;
}
