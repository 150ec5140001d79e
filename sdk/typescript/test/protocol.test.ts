/**
 * Rules of docs/worker-protocol.md the worker once broke, each pinned by the test that caught
 * it: the lost lease in a local run, reports of unknown fate, heartbeats after a fatal answer,
 * results too deep for the encoder, the drain's deadline.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { Handler } from "../src/activity.js";
import { versionOf } from "../src/graph.js";
import { Lease } from "../src/lease.js";
import { Worker } from "../src/worker.js";
import { Code, RpcError } from "../src/rpc.js";
import { core, FakeApi, linearGraph, task, until } from "./fake.js";

/** A handler that waits for its lease to be lost, then fails or returns. */
function untilLost(then: "throws" | "returns"): Handler {
  return async (c, step) => {
    await new Promise<void>((resolve) => step.signal.addEventListener("abort", () => resolve(), { once: true }));
    if (then === "throws") {
      throw new Error("gave up");
    }
    return c;
  };
}

describe("a lease lost while a local step ran", () => {
  for (const [mode, steps, then] of [
    ["LOCAL_SYNC", ["a", "b"], "throws"],
    ["LOCAL_ASYNC", ["a"], "returns"],
  ] as const) {
    it(`ends the run with no report at all (${mode}, the step ${then})`, async () => {
      const api = new FakeApi();
      const bytes = linearGraph(steps, "step");
      const v = versionOf(bytes);
      api.definitions.set(v, bytes);
      api.answer("Heartbeat", { leaseExpiresAtMs: 0, instanceStatus: "CANCELLED", serverNowMs: 0 });
      const w = core(api, { step: untilLost(then) });
      w.start();
      const now = Date.now();
      api.deliver([task({ activity: "step", executionMode: mode, version: v, timeoutMs: 300, serverNowMs: now, leaseExpiresAtMs: now + 300 })]);
      await until("the run to end", () => api.of("Heartbeat").length === 1 && api.polling && w["tasks"].size === 0);
      // Not a final step_failed, not a final `end`: the step's result came after the loss.
      assert.deepEqual(api.reports(), []);
      await w.stop(1_000);
    });
  }
});

describe("a report whose fate stays unknown", () => {
  it("is resent unchanged until its window ends, and no other report follows it", async () => {
    const api = new FakeApi();
    api.answer("CompleteTask", ...Array.from({ length: 100 }, () => new RpcError(Code.UNAVAILABLE, "lost")));
    const w = core(api, { a: (c) => c });
    w.start();
    const now = Date.now();
    api.deliver([task({ timeoutMs: 300, serverNowMs: now, leaseExpiresAtMs: now + 300 })]);
    await until("the report to be given up", () => api.of("CompleteTask").length > 1 && api.polling && w["tasks"].size === 0);
    const sent = api.of("CompleteTask") as Record<string, unknown>[];
    for (const r of sent) {
      assert.deepEqual(r, sent[0], "every resend unchanged, same seq");
    }
    // A ReleaseTask now would be another report under the seq whose fate is unknown; the
    // server is unreachable anyway, and the lease runs out there.
    assert.deepEqual(api.reports().filter((r) => !r.startsWith("complete")), []);
    await w.stop(1_000);
  });
});

describe("a report's deadline", () => {
  it("is bounded by what is left of the lease, so a hung call leaves time to resend it", async () => {
    const api = new FakeApi();
    const w = core(api, { a: (c) => c }, { callTimeoutMs: 30_000 });
    w.start();
    const now = Date.now();
    api.deliver([task({ timeoutMs: 3_000, serverNowMs: now, leaseExpiresAtMs: now + 3_000 })]);
    await until("the report", () => api.of("CompleteTask").length === 1);
    const d = api.calls.find((c) => c.method === "CompleteTask")?.opts?.timeoutMs;
    assert.ok(d !== undefined && d <= 3_000 && d >= 2_000, `a ${d} ms deadline under a 3 s lease`);
    await w.stop(1_000);
  });
});

describe("a report answered CANCELLED or ABORTED", () => {
  for (const code of [Code.CANCELLED, Code.ABORTED]) {
    it(`is resent unchanged, same seq (status ${code}: its fate is unknown)`, async () => {
      const api = new FakeApi();
      api.answer("CompleteTask", new RpcError(code, "a proxy gave up on the call"));
      const w = core(api, { a: (c) => c });
      w.start();
      api.deliver([task()]);
      await until("the task to be done", () => api.of("CompleteTask").length > 0 && api.polling && w["tasks"].size === 0);
      const sent = api.of("CompleteTask");
      assert.equal(sent.length, 2);
      assert.deepEqual(sent[1], sent[0]);
      assert.deepEqual(api.reports(), ["complete a", "complete a"]);
      await w.stop(1_000);
    });
  }
});

describe("heartbeats that renew nothing", () => {
  it("keep the usual cadence after a fatal answer, and retry within a second after no answer", async (t) => {
    const api = new FakeApi();
    api.answer("Heartbeat", new RpcError(Code.PERMISSION_DENIED, "not your queue", "PERMISSION_DENIED"), new RpcError(Code.UNAVAILABLE, "down"));
    const w = core(api, {});
    const now = Date.now();
    const lease = new Lease(task({ timeoutMs: 60_000, serverNowMs: now, leaseExpiresAtMs: now + 60_000 }));
    const settle = (): Promise<void> => new Promise((r) => setImmediate(r));
    t.mock.timers.enable({ apis: ["setTimeout"] });
    lease.keepAlive((l) => w.reporter.beat(l));
    await lease.beatNow(); // refused for good: a third of the lease (20 s) until the next
    t.mock.timers.tick(10_000);
    await settle();
    assert.equal(api.of("Heartbeat").length, 1, "no faster after a fatal answer");
    t.mock.timers.tick(10_001);
    await settle();
    assert.equal(api.of("Heartbeat").length, 2, "a third of the lease after the refusal");
    await settle(); // that one got no answer: again within min(1 s, 60 s / 6)
    t.mock.timers.tick(1_000);
    await settle();
    assert.equal(api.of("Heartbeat").length, 3);
    lease.stop();
  });
});

describe("a result nested deeper than the limit", () => {
  it("fails non-retryably naming the limit however deep it is, even past the encoder's stack", async () => {
    const nested = (n: number): unknown => {
      let v: unknown = 1;
      for (let i = 0; i < n; i++) {
        v = i % 2 === 0 ? [v] : { k: v };
      }
      return v;
    };
    const depths = [129, 302, 5_000, 100_000];
    const api = new FakeApi();
    const handlers: Record<string, Handler> = {};
    for (const n of depths) {
      handlers[`deep${n}`] = () => nested(n);
    }
    const w = core(api, handlers, { concurrency: depths.length });
    w.start();
    api.deliver(depths.map((n) => task({ taskId: `d${n}`, nodeId: `d${n}`, activity: `deep${n}` })));
    await until("every step to fail", () => api.of("FailTask").length === depths.length);
    const fails = new Map((api.of("FailTask") as { taskId: string; failure: unknown }[]).map((r) => [r.taskId, r.failure]));
    for (const n of depths) {
      assert.deepEqual(fails.get(`d${n}`), {
        message: `step result nests ${n} levels deep; the limit is 128`,
        nonRetryable: true,
        errorType: "TooDeep",
      });
    }
    await w.stop(1_000);
  });
});

describe("the drain's deadline", () => {
  it("is 30 s by default, the grace most process supervisors allow before SIGKILL", () => {
    const w = new Worker({}, new FakeApi()).activity("a", (c) => c);
    assert.equal(w["coreOf"]().opts.drainTimeoutMs, 30_000);
  });
});
