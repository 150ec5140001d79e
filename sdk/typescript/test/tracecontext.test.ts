/** The derived trace and span ids against the shared vectors of spec/tracing/ids.json. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { it } from "node:test";

import { instanceSpanId, loopsKey, parseTraceparent, stepSpanId, traceIdFor } from "../src/tracecontext.js";
import { tracingEnabled } from "../src/tracing.js";
import { ROOT } from "./fake.js";

interface Vectors {
  trace_ids: { root_instance_id: string; trace_id: string }[];
  instance_span_ids: { instance_id: string; span_id: string }[];
  step_span_ids: {
    instance_id: string;
    task_id: string;
    node_id: string;
    attempt: number;
    loop_counts: Record<string, number>;
    loops: string;
    span_id: string;
  }[];
  traceparents: { traceparent: string; valid: boolean; trace_id?: string; span_id?: string; flags?: number }[];
}

const V = JSON.parse(readFileSync(join(ROOT, "spec/tracing/ids.json"), "utf8")) as Vectors;

it("derives the ids of the shared vectors", () => {
  for (const c of V.trace_ids) {
    assert.equal(traceIdFor(c.root_instance_id), c.trace_id);
  }
  for (const c of V.instance_span_ids) {
    assert.equal(instanceSpanId(c.instance_id), c.span_id);
  }
  for (const c of V.step_span_ids) {
    assert.equal(loopsKey(c.loop_counts), c.loops);
    assert.equal(stepSpanId(c.instance_id, c.task_id, c.node_id, c.attempt, c.loop_counts), c.span_id);
  }
});

it("parses traceparents as the vectors say", () => {
  assert.ok(V.traceparents.length > 0);
  for (const c of V.traceparents) {
    const got = parseTraceparent(c.traceparent);
    assert.equal(got !== null, c.valid, c.traceparent);
    if (got !== null) {
      assert.deepEqual(got, { traceId: c.trace_id, spanId: c.span_id, flags: c.flags });
    }
  }
});

it("turns tracing on from the OTEL_* variables only", () => {
  assert.equal(tracingEnabled({}), false);
  assert.equal(tracingEnabled({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4317" }), true);
  assert.equal(tracingEnabled({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://x", OTEL_SDK_DISABLED: "true" }), false);
  assert.equal(tracingEnabled({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://x", OTEL_TRACES_EXPORTER: "none" }), false);
});
