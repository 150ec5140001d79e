/** Batched reports (docs/worker-protocol.md, "Batched reports") against the in-memory server. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ReportBatcher } from "../src/batching.js";
import { versionOf } from "../src/graph.js";
import {
  Code,
  RpcError,
  type CallOptions,
  type ReportBatchRequest,
  type ReportBatchResponse,
  type TaskReportAnswer,
  type Task,
} from "../src/rpc.js";
import type { Handler } from "../src/activity.js";
import { core, FakeApi, linearGraph, quiet, task, until } from "./fake.js";

type Report = NonNullable<ReportBatchRequest["reports"]>[number];

/** The in-memory server with ReportBatch: each report is answered as its own RPC would be. */
class BatchingFake extends FakeApi {
  /** While set, a ReportBatch call waits for it before it is served. */
  gate: Promise<void> | null = null;

  async reportBatch(req: ReportBatchRequest, opts: CallOptions): Promise<ReportBatchResponse> {
    this.calls.push({ method: "ReportBatch", req, opts });
    const whole = this.queued.get("ReportBatch")?.shift();
    const gate = this.gate;
    if (gate !== null) {
      await gate;
    }
    if (whole instanceof RpcError) {
      throw whole;
    }
    const answers: TaskReportAnswer[] = [];
    for (const r of req.reports ?? []) {
      answers.push(await this.answerOne(r));
    }
    return { answers };
  }

  private async answerOne(r: Report): Promise<TaskReportAnswer> {
    try {
      if (r.complete != null) {
        return { answer: "task", task: await this.completeTask(r.complete) };
      }
      if (r.fail != null) {
        return { answer: "task", task: await this.failTask(r.fail) };
      }
      if (r.release != null) {
        return { answer: "task", task: await this.releaseTask(r.release) };
      }
      if (r.advance != null) {
        return { answer: "advance", advance: await this.advanceRun(r.advance) };
      }
      return {};
    } catch (e) {
      const err = e as RpcError;
      return { answer: "error", error: { statusCode: err.code, errorCode: err.errorCode, message: err.message } };
    }
  }

  /** How many reports each ReportBatch call carried. */
  batchSizes(): number[] {
    return this.of("ReportBatch").map((r) => (r as ReportBatchRequest).reports?.length ?? 0);
  }
}

function gated(api: BatchingFake): () => void {
  let open: () => void = () => undefined;
  api.gate = new Promise<void>((resolve) => {
    open = () => {
      api.gate = null;
      resolve();
    };
  });
  return open;
}

async function serve(api: BatchingFake, tasks: Task[], over = {}): Promise<ReturnType<typeof core>> {
  const w = core(api, echoes, over);
  w.start();
  api.deliver(tasks);
  await until("the tasks to be reported", () => api.polling && w["tasks"].size === 0);
  return w;
}

const t = (id: string, over: Partial<Task> = {}): Task => task({ taskId: id, nodeId: id, activity: id, ...over });
const echoes: Record<string, Handler> = { a: (c) => c, b: (c) => c, c: (c) => c };

/**
 * Serves `first` and holds its ReportBatch in flight while `more` are served, so that their
 * reports queue up behind it; `meanwhile` runs before those (to queue an answer, say). Resolves
 * once every report was answered.
 */
async function behindABatch(
  api: BatchingFake,
  first: Task,
  more: Task[],
  { handlers = echoes, meanwhile = (): void => undefined } = {},
): Promise<ReturnType<typeof core>> {
  const open = gated(api);
  const w = core(api, handlers, { concurrency: 4 });
  w.start();
  api.deliver([first]);
  await until("the first batch in flight", () => api.of("ReportBatch").length === 1 && api.polling);
  meanwhile();
  api.deliver(more);
  await until(`${more.length} reports waiting`, () => w["api"]["queue"].length === more.length);
  open();
  await until("every report answered", () => api.polling && w["tasks"].size === 0);
  return w;
}

describe("batched reports", () => {
  it("send a lone report at once, and those made while a batch is in flight together in the next", async () => {
    const api = new BatchingFake();
    const w = await behindABatch(api, t("a"), [t("b"), t("c"), t("a", { taskId: "a#2" })]);
    assert.deepEqual(api.batchSizes(), [1, 3]);
    assert.deepEqual(api.reports().sort(), ["complete a", "complete a", "complete b", "complete c"]);
    assert.deepEqual(api.of("CompleteTask").map((r) => (r as { seq: number }).seq), [1, 1, 1, 1]);
    await w.stop(1_000);
  });

  it("give each report its own answer: a refusal in one spoils no other", async () => {
    const api = new BatchingFake();
    api.answer("CompleteTask", new RpcError(Code.INVALID_ARGUMENT, "bad", "INVALID_REQUEST"));
    const w = await behindABatch(api, t("a", { taskId: "a#0" }), [t("b"), t("c")], {
      meanwhile: () => api.answer("CompleteTask", new RpcError(Code.FAILED_PRECONDITION, "stale", "STALE_LEASE")),
    });
    // a: refused for good, released under its seq; b: the lease is gone, dropped; c: applied.
    assert.deepEqual(api.reports(), ["complete a", "complete b", "complete c", "release a / report refused"]);
    assert.equal((api.of("ReleaseTask")[0] as { seq: number }).seq, 1);
    assert.deepEqual(api.batchSizes(), [1, 2, 1]);
    await w.stop(1_000);
  });

  it("resend every report of a batch whose answer was lost, unchanged, same seq", async () => {
    const api = new BatchingFake();
    api.answer("ReportBatch", new RpcError(Code.UNAVAILABLE, "lost"), new RpcError(Code.DEADLINE_EXCEEDED, "lost"));
    const w = await serve(api, [t("a")]);
    const sent = api.of("ReportBatch") as ReportBatchRequest[];
    assert.equal(sent.length, 3);
    assert.deepEqual(sent[1], sent[0]);
    assert.deepEqual(sent[2], sent[0]);
    assert.equal(sent[0]?.reports?.[0]?.complete?.seq, 1);
    await w.stop(1_000);
  });

  it("carry a local run's AdvanceRun, and the UNIMPLEMENTED fallback of a report inside a batch", async () => {
    const api = new BatchingFake();
    const g = linearGraph(["a"]);
    const v = versionOf(g);
    api.definitions.set(v, g);
    api.answer("AdvanceRun", new RpcError(Code.UNIMPLEMENTED, "no AdvanceRun here"));
    const w = await serve(api, [t("a", { executionMode: "LOCAL_SYNC", version: v })]);
    assert.deepEqual(api.reports(), ["advance a / end", "complete a"]);
    assert.deepEqual(api.batchSizes(), [1, 1]);
    assert.equal((api.of("CompleteTask")[0] as { seq: number }).seq, 1, "the refused AdvanceRun's seq");
    await w.stop(1_000);
  });

  it("turn off for good on a server without ReportBatch: every report goes alone", async () => {
    const api = new BatchingFake();
    api.answer("ReportBatch", new RpcError(Code.UNIMPLEMENTED, "unknown method"));
    const w = await serve(api, [t("a")]);
    api.deliver([t("b")]);
    await until("b reported", () => api.of("CompleteTask").length === 2 && api.polling && w["tasks"].size === 0);
    assert.equal(api.of("ReportBatch").length, 1);
    assert.deepEqual(api.reports(), ["complete a", "complete b"]);
    await w.stop(1_000);
  });

  it("split a batch the server finds too large, each report in a batch of its own", async () => {
    const api = new BatchingFake();
    const w = await behindABatch(api, t("a"), [t("b"), t("c")], {
      meanwhile: () => api.answer("ReportBatch", new RpcError(Code.RESOURCE_EXHAUSTED, "too large")),
    });
    assert.deepEqual(api.batchSizes(), [1, 2, 1, 1]);
    assert.deepEqual(api.reports().sort(), ["complete a", "complete b", "complete c"]);
    await w.stop(1_000);
  });

  it("stay under the server's request limit that the tasks carry", async () => {
    const api = new BatchingFake();
    const big = (id: string): Task => task({ taskId: id, activity: "big", maxRequestBytes: 1_500 });
    const w = await behindABatch(api, big("a#0"), [big("a#1"), big("a#2"), big("a#3")], {
      handlers: { big: () => "x".repeat(600) },
    });
    // Two reports of ~650 bytes fit under 1,500 bytes; three do not.
    assert.deepEqual(api.batchSizes(), [1, 2, 1]);
    await w.stop(1_000);
  });

  it("send the rest of a split batch alone once the first part found no ReportBatch", async () => {
    const api = new BatchingFake();
    const b = new ReportBatcher(api, quiet);
    b.maxBytes = 20; // every report (about 16 bytes in a batch) a batch of its own
    const opts = { timeoutMs: 1_000 };
    const complete = (id: string): Promise<unknown> => b.completeTask({ taskId: id, lease: "l", result: Buffer.from("{}"), seq: 1 }, opts);
    const open = gated(api);
    const first = complete("w"); // in flight while the others queue up
    api.answer("ReportBatch", new RpcError(Code.UNIMPLEMENTED, "unknown method"));
    const rest = ["x", "y", "z"].map(complete);
    open();
    assert.equal((await Promise.all([first, ...rest])).length, 4);
    assert.equal(api.of("ReportBatch").length, 2, "w's batch, then x's, answered UNIMPLEMENTED");
    assert.deepEqual(api.of("CompleteTask").map((r) => (r as { taskId: string }).taskId).sort(), ["w", "x", "y", "z"]);
  });

  it("answer every report with an error, never leave one waiting, when a batch cannot be built", async () => {
    const api = new BatchingFake();
    const b = new ReportBatcher(api, quiet);
    const opts = { timeoutMs: 1_000 };
    const open = gated(api);
    const first = b.completeTask({ taskId: "x", lease: "l", seq: 1 }, opts);
    // Queued behind the first; a `next` that is no message cannot be measured or encoded.
    const broken = { taskId: "y", lease: "l", seq: 1, next: 5 as unknown as null };
    const rest = [b.completeTask(broken, opts), b.failTask({ taskId: "z", lease: "l", seq: 1 }, opts)];
    open();
    await first;
    for (const r of await Promise.allSettled(rest)) {
      assert.equal(r.status, "rejected");
      assert.equal((r as PromiseRejectedResult).reason.code, Code.INTERNAL);
    }
  });
});
