/**
 * The conformance activities of spec/conformance/ACTIVITIES.md for the TypeScript worker. Each
 * is a pure function of the context and of the step's node id and attempt; numbers follow the
 * document's rules exactly (counts are 64-bit integers, computed with `bigint`).
 */
import { closeSync, openSync, writeSync } from "node:fs";

import type { Activity, Predicate } from "../activity.js";
import { JsonFloat, stringify, type Json, type JsonObject } from "../json.js";
import { LeaseLostError, NonRetryableError, type Step } from "../step.js";

/** The environment variable naming the trace file. */
export const TRACE_ENV = "WIGGLE_CONFORMANCE_TRACE";

let traceFd: number | undefined;
let tracePath: string | undefined;

/**
 * Appends `{"instance_id","flow","node_id","activity","attempt"}` to the trace file in one
 * unbuffered write on a file opened for appending: concurrent invocations never interleave and
 * a worker killed right after leaves the whole line behind.
 */
function trace(step: Step, activity: string): void {
  const path = process.env[TRACE_ENV];
  if (path === undefined || path === "") {
    return;
  }
  if (traceFd === undefined || tracePath !== path) {
    if (traceFd !== undefined) {
      closeSync(traceFd);
    }
    traceFd = openSync(path, "a", 0o644);
    tracePath = path;
  }
  const line = stringify({
    instance_id: step.instanceId,
    flow: step.flow,
    node_id: step.nodeId,
    activity,
    attempt: step.attempt,
  });
  writeSync(traceFd, `${line}\n`);
}

function isObject(v: Json | undefined): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof JsonFloat);
}

function obj(ctx: Json, activity: string): JsonObject {
  if (!isObject(ctx)) {
    throw new NonRetryableError(`conformance: ${activity} needs an object`);
  }
  return ctx;
}

function predObj(ctx: Json): JsonObject {
  return isObject(ctx) ? ctx : {};
}

function get(o: JsonObject, key: string): Json | undefined {
  return Object.prototype.hasOwnProperty.call(o, key) ? o[key] : undefined;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** A count: an integer (no fraction, no exponent) within 64 bits, else 0. */
function count(v: Json | undefined): bigint {
  if (typeof v === "number" && Number.isInteger(v)) {
    return BigInt(v); // a plain integral number is an integer literal (json.ts)
  }
  if (typeof v === "bigint" && v >= INT64_MIN && v <= INT64_MAX) {
    return v;
  }
  return 0n;
}

/** A count, or `fallback` when the field is missing. */
function countOr(o: JsonObject, key: string, fallback: bigint): bigint {
  const v = get(o, key);
  return v === undefined ? fallback : count(v);
}

/** An integer as the JSON model holds it: a number when exact, else a bigint. */
function int(b: bigint): number | bigint {
  return b >= BigInt(Number.MIN_SAFE_INTEGER) && b <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(b) : b;
}

/** A non-integer result of double arithmetic: kept a non-integer when its value is integral. */
function float(n: number): number | JsonFloat {
  return Number.isInteger(n) || Object.is(n, -0) || !Number.isFinite(n) ? new JsonFloat(n) : n;
}

/** A number: an integer (bigint) or a non-integer (double); null for anything else. */
function numeric(v: Json | undefined): { int: bigint } | { float: number } | null {
  if (typeof v === "bigint") {
    return { int: v };
  }
  if (typeof v === "number") {
    return Number.isInteger(v) ? { int: BigInt(v) } : { float: v };
  }
  if (v instanceof JsonFloat) {
    return { float: v.valueOf() };
  }
  return null;
}

function appendNode(c: JsonObject, step: Step): JsonObject {
  const trail = get(c, "trail");
  return { ...c, trail: [...(Array.isArray(trail) ? trail : []), step.nodeId] };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason instanceof Error ? signal.reason : new LeaseLostError("the lease is lost"));
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** The task, combine and apply activities. */
export const activities: Readonly<Record<string, Activity<Json, Json>>> = {
  noop: (ctx) => ctx,
  append: (ctx, step) => appendNode(obj(ctx, "append"), step),
  inc: (ctx) => {
    const c = obj(ctx, "inc");
    return { ...c, n: int(count(get(c, "n")) + 1n) };
  },
  inc_m: (ctx) => {
    const c = obj(ctx, "inc_m");
    return { ...c, m: int(count(get(c, "m")) + 1n) };
  },
  zero: (ctx) => ({ ...obj(ctx, "zero"), n: 0 }),
  double: (ctx) => {
    const n = typeof ctx === "boolean" ? null : numeric(ctx);
    if (n === null) {
      throw new NonRetryableError("conformance: double needs a number");
    }
    return "int" in n ? int(2n * n.int) : float(2 * n.float);
  },
  grow: (ctx) => {
    const c = obj(ctx, "grow");
    const n = countOr(c, "grow_bytes", 0n);
    return { ...c, blob: "x".repeat(Number(n > 0n ? n : 0n)) };
  },
  nest: (ctx) => {
    let depth = isObject(ctx) ? countOr(ctx, "nest_depth", 1n) : 1n;
    depth = depth < 0n ? 0n : depth > 100_000n ? 100_000n : depth;
    let out: Json = ctx;
    for (let i = 0n; i < depth; i++) {
      out = [out];
    }
    return out;
  },
  fail_times: (ctx, step) => {
    const c = obj(ctx, "fail_times");
    const plan = get(c, "fail_times");
    const k = isObject(plan) ? count(get(plan, step.nodeId)) : 0n;
    if (BigInt(step.attempt) <= k) {
      throw new Error(`planned failure ${step.nodeId} attempt ${step.attempt}`);
    }
    return appendNode(c, step);
  },
  fail_always: (_ctx, step) => {
    throw new Error(`failure ${step.nodeId} attempt ${step.attempt}`);
  },
  fail_fatal: (_ctx, step) => {
    throw new NonRetryableError(`fatal ${step.nodeId}`);
  },
  hold: async (ctx, step) => {
    const c = obj(ctx, "hold");
    // Slices of at most 50 ms; the worker heartbeats on its own meanwhile, and a lost lease
    // (the signal) stops the step early: its result would be refused anyway. Until a deadline,
    // so each slice's oversleep on a loaded machine does not add up.
    const until = performance.now() + Number(countOr(c, "hold_ms", 300n));
    for (let left = until - performance.now(); left > 0; left = until - performance.now()) {
      await sleep(Math.min(Math.ceil(left), 50), step.signal);
    }
    return appendNode(c, step);
  },
  merge_results: (ctx) => {
    const c = obj(ctx, "merge_results");
    const context = obj(get(c, "context") ?? null, "merge_results");
    return { ...context, results: get(c, "results") ?? null };
  },
  sum_results: (ctx) => {
    const c = obj(ctx, "sum_results");
    const context = obj(get(c, "context") ?? null, "sum_results");
    const results = get(c, "results");
    const values: Json[] = Array.isArray(results) ? results : isObject(results) ? Object.values(results) : [];
    let total: { int: bigint } | { float: number } = { int: 0n };
    for (const v of values) {
      const term = typeof v === "boolean" ? null : numeric(v);
      const add = term ?? { int: isObject(v) ? count(get(v, "n")) : 0n };
      if ("int" in total && "int" in add) {
        total = { int: total.int + add.int };
      } else {
        const sum: number = ("int" in total ? Number(total.int) : total.float) + ("int" in add ? Number(add.int) : add.float);
        total = { float: sum };
      }
    }
    return { ...context, sum: "int" in total ? int(total.int) : float(total.float) };
  },
  apply_signal: (ctx) => {
    const c = obj(ctx, "apply_signal");
    const context = obj(get(c, "context") ?? null, "apply_signal");
    const signals = get(context, "signals");
    return { ...context, signals: [...(Array.isArray(signals) ? signals : []), get(c, "signal") ?? null] };
  },
};

/** The predicate activities. */
export const predicates: Readonly<Record<string, Predicate<Json>>> = {
  is_true: (ctx, step) => get(predObj(ctx), step.nodeId) === true,
  lt: (ctx) => {
    const c = predObj(ctx);
    return count(get(c, "n")) < count(get(c, "limit"));
  },
  lt_m: (ctx) => {
    const c = predObj(ctx);
    return count(get(c, "m")) < count(get(c, "limit_m"));
  },
  is_even: (ctx) => {
    const n = typeof ctx === "boolean" ? null : numeric(ctx);
    return n !== null && "int" in n && n.int % 2n === 0n && !(ctx instanceof JsonFloat);
  },
};

/** Every conformance activity wrapped to write its trace line first, for a Worker's options. */
export function traced(): {
  activities: Record<string, Activity<Json, Json>>;
  predicates: Record<string, Predicate<Json>>;
} {
  const a: Record<string, Activity<Json, Json>> = {};
  for (const [name, fn] of Object.entries(activities)) {
    a[name] = (ctx, step) => {
      trace(step, name);
      return fn(ctx, step);
    };
  }
  const p: Record<string, Predicate<Json>> = {};
  for (const [name, fn] of Object.entries(predicates)) {
    p[name] = (ctx, step) => {
      trace(step, name);
      return fn(ctx, step);
    };
  }
  return { activities: a, predicates: p };
}
