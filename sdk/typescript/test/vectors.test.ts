/**
 * The shared vectors of spec/conformance/: the handback rule (traversal/) against traversal.ts,
 * and the local-run loop (localrun/) against the real LocalRun over the fake server: the same
 * vectors the Python, Go and Java workers run.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { stepActivity, parseGraph } from "../src/graph.js";
import { Lease } from "../src/lease.js";
import { LocalRun } from "../src/local-run.js";
import { Code, RpcError } from "../src/rpc.js";
import { advance, leaseBudgetLeft } from "../src/traversal.js";
import type { Handler } from "../src/activity.js";
import { core, FakeApi, ROOT, task } from "./fake.js";

const TRAVERSAL = join(ROOT, "spec/conformance/traversal");
const LOCALRUN = join(ROOT, "spec/conformance/localrun");

function files(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort();
}

interface TraversalCase {
  description: string;
  node: string;
  predicate: boolean | null;
  loop_counts: Record<string, number>;
  worker_queues: string[];
  expect: { next: string | null; loop_counts: Record<string, number>; handback: string | null };
}

describe("traversal vectors", () => {
  let n = 0;
  for (const file of files(TRAVERSAL)) {
    const doc = JSON.parse(readFileSync(join(TRAVERSAL, file), "utf8"));
    if (file === "lease_budget.json") {
      for (const c of doc.cases as { remaining_ms: number; lease_ms: number; expect: boolean }[]) {
        n++;
        it(`${file}: ${c.remaining_ms} of ${c.lease_ms}`, () => {
          assert.equal(leaseBudgetLeft(c.remaining_ms, c.lease_ms), c.expect);
        });
      }
      continue;
    }
    const graph = parseGraph(Buffer.from(JSON.stringify(doc.graph)));
    for (const c of doc.cases as TraversalCase[]) {
      n++;
      it(`${file}: ${c.description}`, () => {
        const move = advance(graph, c.node, c.worker_queues, c.predicate, c.loop_counts);
        assert.deepEqual(
          { next: move.next, loop_counts: move.loopCounts, handback: move.handback },
          c.expect,
        );
      });
    }
  }
  it("has them all", () => assert.ok(n >= 30, `only ${n} traversal vectors`));
});

interface LocalRunCase {
  description: string;
  mode: "LOCAL_SYNC" | "LOCAL_ASYNC";
  worker_queues: string[];
  worker_activities: string[] | null;
  batch_size: number;
  max_request_bytes: number;
  start: string;
  attempt: number;
  loop_counts: Record<string, number>;
  steps: string[];
  after_step: Record<string, string>;
  advance_run: string;
  expect: string[];
  expect_attempts?: number[];
}

async function runVector(graphDoc: unknown, c: LocalRunCase): Promise<void> {
  const bytes = Buffer.from(JSON.stringify(graphDoc));
  const graph = parseGraph(bytes);
  const api = new FakeApi();
  if (c.advance_run === "unimplemented") {
    api.answer("AdvanceRun", ...Array.from({ length: 10 }, () => new RpcError(Code.UNIMPLEMENTED, "no AdvanceRun")));
  }
  const outcomes = [...c.steps];
  const attempts: number[] = [];
  let lease: Lease | undefined;
  let w: ReturnType<typeof core> | undefined;
  const afterStep = (n: number): void => {
    switch (c.after_step[String(n)]) {
      case "shutdown":
        (w as ReturnType<typeof core>).draining = true;
        break;
      case "lease_budget": {
        const now = Date.now();
        const l = lease as Lease;
        l.renewed(now + l.length / 10, now, 0); // a tenth of the lease left
        break;
      }
      case "lease_lost":
        (lease as Lease).lose("the vector says so");
        break;
    }
  };
  const handler: Handler = (_input, step) => {
    attempts.push(step.attempt);
    const n = attempts.length;
    try {
      const next = outcomes.shift();
      if (next === undefined) {
        throw new Error("the vector has no outcome left for this step");
      }
      const [kind, size] = next.split(" ");
      switch (kind) {
        case "fail":
          throw new Error(`planned failure ${n}`);
        case "true":
          return true;
        case "false":
          return false;
        case "not_boolean":
          return { not: "a boolean" };
      }
      if (size !== undefined) {
        return "x".repeat(Number(size) - 2); // a JSON string of exactly `size` bytes
      }
      return { step: n };
    } finally {
      afterStep(n);
    }
  };
  const handlers: Record<string, Handler> = {};
  for (const node of graph.nodes.values()) {
    const a = stepActivity(node);
    if (a !== "" && (c.worker_activities === null || c.worker_activities.includes(a))) {
      handlers[a] = handler;
    }
  }
  w = core(api, handlers, { queues: c.worker_queues, localBatchSize: c.batch_size });
  const start = graph.nodes.get(c.start);
  assert.ok(start !== undefined);
  const t = task({
    taskId: c.start,
    nodeId: c.start,
    activity: stepActivity(start),
    attempt: c.attempt,
    executionMode: c.mode,
    loopCounts: Buffer.from(JSON.stringify(c.loop_counts)),
    maxRequestBytes: c.max_request_bytes,
    flow: graph.name,
    version: graph.version,
  });
  lease = new Lease(t);
  await new LocalRun(w, t, graph, lease).run();
  lease.stop();
  assert.deepEqual(api.reports(), c.expect);
  assert.deepEqual(outcomes, [], "steps the worker never ran");
  if (c.expect_attempts !== undefined) {
    assert.deepEqual(attempts, c.expect_attempts);
  }
}

describe("local-run vectors", () => {
  let n = 0;
  for (const file of files(LOCALRUN)) {
    const doc = JSON.parse(readFileSync(join(LOCALRUN, file), "utf8"));
    for (const c of doc.cases as LocalRunCase[]) {
      n++;
      it(`${file}: ${c.description}`, () => runVector(doc.graph, c));
    }
  }
  it("has them all", () => assert.ok(n >= 40, `only ${n} local-run vectors`));
});
