/** Eager start (docs/worker-protocol.md, "Eager dispatch"): the first task in the start's answer. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { Handler } from "../src/activity.js";
import { Code, RpcError, type StartInstanceRequest } from "../src/rpc.js";
import { core, FakeApi, task, until } from "./fake.js";

const inc: Handler = (c) => ({ ...(c as object), n: 1 });

/** The slots the next poll asks for, once the open one is answered empty. */
async function nextPollAsks(api: FakeApi): Promise<number> {
  const before = api.of("PollTasks").length;
  api.deliver([]);
  await until("the next poll", () => api.of("PollTasks").length > before && api.polling);
  return (api.of("PollTasks")[before] as { maxTasks: number }).maxTasks;
}

describe("eager start", () => {
  it("borrows a slot from the open poll, asks for the first task and runs it here", async () => {
    const api = new FakeApi();
    api.answer("StartInstance", { instanceId: "i-1", version: "sha256:0", eagerTask: task({ activity: "inc" }), created: true });
    const w = core(api, { inc }, { concurrency: 2 });
    w.start();
    await until("a poll", () => api.polling);
    const started = await w.startInstance("f", { n: 0 }, { instanceId: "i-1" });
    assert.deepEqual(started, { instanceId: "i-1", version: "sha256:0", created: true, eager: true });
    const req = api.of("StartInstance")[0] as StartInstanceRequest;
    assert.equal(Buffer.from(req.input as Buffer).toString(), '{"n":0}');
    assert.deepEqual(req.eager, { workerId: "w-1", queues: ["default"], activities: ["inc"] });
    await until("the eager task's report", () => api.reports().length === 1 && w["tasks"].size === 0);
    assert.deepEqual(api.reports(), ["complete a"]);
    assert.equal(String((api.of("CompleteTask")[0] as { result: Buffer }).result), '{"n":1}');
    assert.equal(await nextPollAsks(api), 2, "the borrowed slot is back, no more and no less");
    await w.stop(1_000);
  });

  it("gives the slot back when the first task is not for this worker", async () => {
    const api = new FakeApi();
    const w = core(api, { inc }, { concurrency: 3 });
    w.start();
    await until("a poll", () => api.polling);
    const started = await w.startInstance("f", null, {});
    assert.equal(started.eager, false);
    assert.notEqual((api.of("StartInstance")[0] as StartInstanceRequest).eager, null);
    assert.equal(await nextPollAsks(api), 3);
    await w.stop(1_000);
  });

  it("sends no eager request when told not to, or when the worker is not serving", async () => {
    const api = new FakeApi();
    const idle = core(api, { inc });
    assert.equal((await idle.startInstance("f", 1, {})).eager, false);
    const w = core(api, { inc });
    w.start();
    await until("a poll", () => api.polling);
    await w.startInstance("f", 2, { eager: false, version: "sha256:9" });
    const [first, second] = api.of("StartInstance") as StartInstanceRequest[];
    assert.equal(first?.eager, null, "a worker that is not serving runs nothing");
    assert.equal(second?.eager, null);
    assert.equal(second?.version, "sha256:9");
    await w.stop(1_000);
  });

  it("refuses an input with no JSON form before calling the server", async () => {
    const api = new FakeApi();
    const w = core(api, { inc });
    const cyclic: Record<string, unknown> = {};
    cyclic["self"] = cyclic;
    await assert.rejects(w.startInstance("f", cyclic as never, {}), (e: unknown) => !(e instanceof RpcError));
    assert.equal(api.of("StartInstance").length, 0);
  });

  it("rejects with the server's refusal and keeps no slot", async () => {
    const api = new FakeApi();
    api.answer("StartInstance", new RpcError(Code.NOT_FOUND, "no flow named nope", "DEFINITION_NOT_FOUND"));
    const w = core(api, { inc }, { concurrency: 2 });
    w.start();
    await until("a poll", () => api.polling);
    await assert.rejects(w.startInstance("nope", null, {}), (e: unknown) => e instanceof RpcError && e.errorCode === "DEFINITION_NOT_FOUND");
    assert.equal(await nextPollAsks(api), 2);
    await w.stop(1_000);
  });

  it("gives back unrun an eager task that arrives once the drain began", async () => {
    const api = new FakeApi();
    const w = core(api, { inc });
    w.start();
    await until("a poll", () => api.polling);
    let stopped: Promise<void> = Promise.resolve();
    api.answer("StartInstance", () => {
      stopped = w.stop(1_000); // the drain begins while the start is on its way
      return { instanceId: "i-1", version: "sha256:0", eagerTask: task({ activity: "inc" }), created: true };
    });
    const started = await w.startInstance("f", null, {});
    assert.equal(started.eager, false);
    await stopped;
    assert.deepEqual(api.reports(), ["release a / shutdown"]);
  });
});
