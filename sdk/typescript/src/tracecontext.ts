/**
 * W3C trace context and Wiggle's derived span identities (docs/observability.md,
 * "Identities"): the same functions as the server's and every other SDK's, held to the vectors
 * in spec/tracing/ids.json. Pure: no OpenTelemetry import.
 */
import { createHash } from "node:crypto";

/** A parsed traceparent: 32 and 16 lowercase hex digits and the flags byte. */
export interface TraceContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly flags: number;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** A W3C traceparent, or null when it is malformed, oversized or all-zero. */
export function parseTraceparent(value: string): TraceContext | null {
  if (value === "" || value.length > 512) {
    return null;
  }
  const m = TRACEPARENT.exec(value.trim());
  if (m === null) {
    return null;
  }
  const [, version, traceId, spanId, flags, rest] = m as unknown as [string, string, string, string, string, string?];
  if (version === "ff" || (version === "00" && rest !== undefined)) {
    return null;
  }
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) {
    return null;
  }
  return { traceId, spanId, flags: parseInt(flags, 16) };
}

function digest(text: string, size: number): string {
  const raw = createHash("sha256").update(text, "utf8").digest().subarray(0, size);
  if (raw.every((b) => b === 0)) {
    raw[size - 1] = 1;
  }
  return raw.toString("hex");
}

/** The trace of an instance tree whose start carried no traceparent. */
export function traceIdFor(rootInstanceId: string): string {
  return digest(`wiggle.trace\n${rootInstanceId}`, 16);
}

/** The instance's span: the parent of its steps and of the server's spans. */
export function instanceSpanId(instanceId: string): string {
  return digest(`wiggle.instance\n${instanceId}`, 8);
}

/** `id=count` of every loop the token is inside, sorted by id, joined by commas. */
export function loopsKey(loopCounts: Readonly<Record<string, number>>): string {
  return Object.keys(loopCounts)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .map((k) => `${k}=${loopCounts[k]}`)
    .join(",");
}

/** A step attempt's span. */
export function stepSpanId(
  instanceId: string,
  taskId: string,
  nodeId: string,
  attempt: number,
  loopCounts: Readonly<Record<string, number>>,
): string {
  return digest(`wiggle.step\n${instanceId}\n${taskId}\n${nodeId}\n${attempt}\n${loopsKey(loopCounts)}`, 8);
}

/**
 * The trace an instance tree is in: its start's traceparent (trace id and flags), or the
 * derived one (sampled) when there was none; `spanId` is the root's instance span.
 */
export function deriveTrace(rootInstanceId: string, traceparent: string): TraceContext {
  const given = parseTraceparent(traceparent);
  return {
    traceId: given?.traceId ?? traceIdFor(rootInstanceId),
    spanId: instanceSpanId(rootInstanceId),
    flags: given?.flags ?? 1,
  };
}
