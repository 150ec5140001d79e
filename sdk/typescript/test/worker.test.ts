/** The worker against the in-memory server: SERVER steps, reports, leases, the drain. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { Handler } from "../src/activity.js";
import { versionOf } from "../src/graph.js";
import { Code, RpcError, type Task } from "../src/rpc.js";
import { LeaseLostError, NonRetryableError, type Step } from "../src/step.js";
import { Worker } from "../src/worker.js";
import { core, FakeApi, linearGraph, task, until } from "./fake.js";

/** The LOCAL graph a -> b -> c -> end, every step the activity `step`. */
const graphBytes = (): Buffer => linearGraph(["a", "b", "c"], "step");

async function serve(api: FakeApi, handlers: Record<string, Handler>, tasks: Task[], over = {}): Promise<ReturnType<typeof core>> {
  const w = core(api, handlers, over);
  w.start();
  api.deliver(tasks);
  await until("the tasks to be reported", () => api.polling && w["tasks"].size === 0);
  return w;
}

const echo: Handler = (input) => input;
const V = versionOf(graphBytes());

describe("SERVER steps", () => {
  it("completes with the handler's result, seq 1, asking for the instance's next task", async () => {
    const api = new FakeApi();
    api.answer("CompleteTask", { instanceStatus: "RUNNING", nextTask: task({ taskId: "b#2", nodeId: "b", activity: "inc" }) });
    const w = await serve(api, { inc: (c) => ({ ...(c as object), n: 1 }), echo }, [task({ activity: "inc" })]);
    const completes = api.of("CompleteTask") as Record<string, unknown>[];
    assert.deepEqual(api.reports(), ["complete a", "complete b"]);
    assert.equal(String(completes[0]?.["result"]), '{"n":1}');
    assert.equal(completes[0]?.["seq"], 1);
    assert.deepEqual(completes[0]?.["next"], { workerId: "w-1", queues: ["default"], activities: ["echo", "inc"] });
    assert.equal(completes[1]?.["seq"], 1, "a next task is a new lease: seq from 1");
    await w.stop(1_000);
  });

  it("polls with its identity, every activity, the free slots, and a deadline past the hold", async () => {
    const api = new FakeApi();
    let timeout = 0;
    const poll = api.pollTasks.bind(api);
    api.pollTasks = (req, opts) => {
      timeout = opts.timeoutMs;
      return poll(req, opts);
    };
    const w = core(api, { b: echo, a: echo }, { concurrency: 3, pollWaitMs: 10_000 });
    w.start();
    await until("a poll", () => api.polling);
    assert.deepEqual(api.of("PollTasks")[0], {
      workerId: "w-1",
      queues: ["default"],
      maxTasks: 3,
      waitMs: 10_000,
      activities: ["a", "b"],
      slots: 3,
      sdk: "wiggle-typescript/0.2.0",
    });
    assert.ok(timeout >= 11_000, `poll deadline ${timeout} ms for a 10 s hold`);
    await w.stop(1_000);
  });

  it("fails retryably, non-retryably, and for an activity it does not have", async () => {
    const api = new FakeApi();
    const w = await serve(
      api,
      {
        boom: () => {
          throw new TypeError("bad input");
        },
        fatal: async () => {
          throw new NonRetryableError("never again");
        },
      },
      [task({ taskId: "a", activity: "boom" }), task({ taskId: "b", nodeId: "b", activity: "fatal" }), task({ taskId: "c", nodeId: "c", activity: "ghost" })],
    );
    const fails = new Map((api.of("FailTask") as { taskId: string; failure: unknown }[]).map((r) => [r.taskId, r.failure]));
    assert.deepEqual(fails.get("a"), { message: "bad input", nonRetryable: false, errorType: "TypeError" });
    assert.deepEqual(fails.get("b"), { message: "never again", nonRetryable: true, errorType: "NonRetryableError" });
    assert.deepEqual(fails.get("c"), {
      message: "no activity named 'ghost' is registered on this worker",
      nonRetryable: false,
      errorType: "ActivityNotFound",
    });
    await w.stop(1_000);
  });

  it("fails a result over the payload or depth limit non-retryably, naming the limit", async () => {
    const api = new FakeApi();
    const w = await serve(
      api,
      {
        big: () => "x".repeat(100),
        deep: () => {
          let v: unknown = 1;
          for (let i = 0; i < 129; i++) {
            v = [v];
          }
          return v;
        },
        ok: () => "x".repeat(98),
      },
      [
        task({ taskId: "a", activity: "big", maxPayloadBytes: 101 }),
        task({ taskId: "b", activity: "deep" }),
        task({ taskId: "c", activity: "ok", maxPayloadBytes: 100 }),
      ],
    );
    const fails = new Map((api.of("FailTask") as { taskId: string; failure: unknown }[]).map((r) => [r.taskId, r.failure]));
    assert.deepEqual(fails.get("a"), {
      message: "step result is 102 bytes; the limit is 101 bytes (max_payload_bytes)",
      nonRetryable: true,
      errorType: "PayloadTooLarge",
    });
    assert.deepEqual(fails.get("b"), {
      message: "step result nests 129 levels deep; the limit is 128",
      nonRetryable: true,
      errorType: "TooDeep",
    });
    assert.deepEqual(api.reports().filter((r) => r.startsWith("complete")), ["complete c"]);
    await w.stop(1_000);
  });
});

describe("reports", () => {
  it("resends a report whose answer was lost, unchanged, with the same seq", async () => {
    const api = new FakeApi();
    api.answer("CompleteTask", new RpcError(Code.UNAVAILABLE, "lost"), new RpcError(Code.DEADLINE_EXCEEDED, "lost"));
    const w = await serve(api, { a: echo }, [task()]);
    const sent = api.of("CompleteTask") as Record<string, unknown>[];
    assert.equal(sent.length, 3);
    assert.deepEqual(sent[0], sent[2]);
    assert.equal(sent[2]?.["seq"], 1);
    await w.stop(1_000);
  });

  it("releases at once, reusing the seq, a task whose report was refused for another reason", async () => {
    const api = new FakeApi();
    api.answer("CompleteTask", new RpcError(Code.INVALID_ARGUMENT, "bad", "INVALID_REQUEST"));
    const w = await serve(api, { a: echo }, [task()]);
    assert.deepEqual(api.reports(), ["complete a", "release a / report refused"]);
    assert.equal((api.of("ReleaseTask")[0] as { seq: number }).seq, 1);
    await w.stop(1_000);
  });

  it("drops, without releasing, a task whose lease the server says is gone", async () => {
    const api = new FakeApi();
    api.answer("CompleteTask", new RpcError(Code.FAILED_PRECONDITION, "stale", "STALE_LEASE"));
    const w = await serve(api, { a: echo }, [task()]);
    assert.deepEqual(api.reports(), ["complete a"]);
    await w.stop(1_000);
  });

  it("numbers a local run's reports 1, 2, 3 under its lease", async () => {
    const api = new FakeApi();
    api.definitions.set(V, graphBytes());
    const w = await serve(api, { step: echo }, [task({ activity: "step", executionMode: "LOCAL_SYNC", version: V })]);
    assert.deepEqual(api.reports(), ["advance a", "advance b", "advance c / end"]);
    assert.deepEqual(api.of("AdvanceRun").map((r) => (r as { seq: number }).seq), [1, 2, 3]);
    await w.stop(1_000);
  });
});

describe("leases", () => {
  it("heartbeats at a third of the lease, naming the step, and aborts the step when the lease is lost", async () => {
    const api = new FakeApi();
    let seen: Step | undefined;
    api.answer("Heartbeat", (req: { nodeId: string }) => {
      const now = Date.now();
      return { leaseExpiresAtMs: now + 300, instanceStatus: req.nodeId === "a" ? "RUNNING" : "RUNNING", serverNowMs: now };
    }, { leaseExpiresAtMs: 0, instanceStatus: "CANCELLED", serverNowMs: 0 });
    const slow: Handler = async (_c, step) => {
      seen = step;
      await new Promise((_resolve, reject) => step.signal.addEventListener("abort", () => reject(step.signal.reason)));
    };
    const w = await serve(api, { a: slow }, [task({ timeoutMs: 300, leaseExpiresAtMs: Date.now() + 300 })]);
    assert.ok(seen?.signal.aborted);
    assert.ok(seen?.signal.reason instanceof LeaseLostError);
    assert.match(String(seen?.signal.reason.message), /CANCELLED/);
    assert.deepEqual(api.of("Heartbeat")[0], { taskId: "a", lease: "lease-1", nodeId: "a" });
    assert.deepEqual(api.reports(), [], "nothing reported on a lost lease");
    await w.stop(1_000);
  });

  it("measures what is left of a lease on the server's clock, not this host's", async () => {
    const api = new FakeApi();
    api.definitions.set(V, graphBytes());
    // The server's clock is an hour ahead: 60 s left all the same.
    const skewed = Date.now() + 3_600_000;
    const w = await serve(api, { step: echo }, [
      task({ activity: "step", executionMode: "LOCAL_ASYNC", version: V, serverNowMs: skewed, leaseExpiresAtMs: skewed + 60_000 }),
    ]);
    assert.deepEqual(api.reports(), ["advance a b c / end"]);
    await w.stop(1_000);
  });

  it("fetches a version's graph once for concurrent tasks", async () => {
    const api = new FakeApi();
    api.definitions.set(V, graphBytes());
    const local = (id: string): Task => task({ taskId: id, activity: "step", executionMode: "LOCAL_ASYNC", version: V });
    const w = await serve(api, { step: echo }, [local("a#1"), local("a#2"), local("a#3")]);
    assert.equal(api.of("GetDefinition").length, 1);
    assert.equal(api.reports().length, 3);
    await w.stop(1_000);
  });
});

describe("many tasks at once", () => {
  it("share the worker's signals without a listener-leak warning", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w.name);
    };
    process.on("warning", onWarning);
    const api = new FakeApi();
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const w = core(api, { a: () => gate }, { concurrency: 32 });
    w.start();
    api.deliver(Array.from({ length: 32 }, (_, i) => task({ taskId: `a#${i}` })));
    await until("32 steps in flight", () => w["tasks"].size === 32);
    release();
    await until("32 reports", () => api.of("CompleteTask").length === 32);
    await w.stop(1_000);
    await new Promise((r) => setImmediate(r));
    process.off("warning", onWarning);
    assert.deepEqual(warnings, []);
  });
});

describe("the drain", () => {
  it("ends the poll with EndPolls and releases unrun what it still brings", async () => {
    const api = new FakeApi();
    const w = core(api, { a: echo });
    w.start();
    await until("a poll", () => api.polling);
    api.answer("EndPolls", () => {
      api.deliver([task({ taskId: "late" })]);
      return { ended: 1 };
    });
    await w.stop(5_000);
    assert.deepEqual(api.reports(), ["release late / shutdown"]);
    assert.equal(api.of("PollTasks").length, 1, "no poll after EndPolls");
    assert.ok(api.closed);
  });

  it("lets a running SERVER step finish and report, and hands a local run back with shutdown", async () => {
    const api = new FakeApi();
    api.definitions.set(V, graphBytes());
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const w = core(api, {
      step: async (c) => {
        await gate;
        return c;
      },
    });
    w.start();
    api.deliver([
      task({ taskId: "s", activity: "step" }),
      task({ taskId: "a", activity: "step", executionMode: "LOCAL_ASYNC", version: V }),
    ]);
    await until("both steps to start", () => api.of("GetDefinition").length === 1 && w["tasks"].size === 2);
    const stopped = w.stop(5_000);
    release();
    await stopped;
    assert.deepEqual(api.reports().sort(), ["advance a / shutdown", "complete s"]);
    assert.equal((api.of("CompleteTask")[0] as { next: unknown }).next, null, "no next task while draining");
  });

  it("with abortStepsOnDrain, aborts running steps and gives them back unrun", async () => {
    const api = new FakeApi();
    const w = core(
      api,
      {
        a: async (_c, step) => {
          await new Promise((_resolve, reject) => step.signal.addEventListener("abort", () => reject(step.signal.reason)));
        },
      },
      { abortStepsOnDrain: true },
    );
    w.start();
    api.deliver([task()]);
    await until("the step to start", () => w["tasks"].size === 1);
    await w.stop(5_000);
    assert.deepEqual(api.reports(), ["release a / shutdown"]);
  });
});

describe("the public Worker", () => {
  it("refuses bad names and options at once, with what is wrong", () => {
    assert.throws(() => new Worker({ queues: [] }), /at least one queue/);
    assert.throws(() => new Worker({ concurrency: 0 }), /concurrency must be a positive integer/);
    assert.throws(() => new Worker().activity("-bad", echo), /activity name "-bad" is not/);
    assert.throws(() => new Worker().activity("a", echo).predicate("a", () => true), /already registered/);
    assert.throws(() => new Worker({ connection: "127.0.0.1:1" }).start(), /register at least one activity/);
  });

  it("serves with typed handlers through the options object and the chained calls", async () => {
    const api = new FakeApi();
    interface Order {
      qty: number;
    }
    const w = new Worker({ activities: { a: (o: Order, step: Step) => ({ ...o, key: step.idempotencyKey }) } }, api).predicate(
      "p",
      (o: Order) => o.qty <= 10,
    );
    assert.deepEqual(w.activities, ["a", "p"]);
    w.start();
    api.deliver([task({ input: Buffer.from('{"qty":3}') }), task({ taskId: "p", nodeId: "p", activity: "p", input: Buffer.from('{"qty":30}') })]);
    await until("two reports", () => api.of("CompleteTask").length === 2);
    const results = (api.of("CompleteTask") as { taskId: string; result: Buffer }[]).map((r) => `${r.taskId}=${String(r.result)}`).sort();
    assert.deepEqual(results, ['a={"qty":3,"key":"i-1/a/1"}', "p=false"]);
    await w.stop();
  });
});
