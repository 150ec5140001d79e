/**
 * The flush half of the local-run loop (docs/worker-protocol.md, "Local runs"): a port of
 * wiggle/localrun.py, checked with it against spec/conformance/localrun/.
 */
import type { ExecutionMode, GraphNode } from "./graph.js";

/** LOCAL_ASYNC results buffered before a run flushes anyway. */
export const DEFAULT_BATCH_SIZE = 64;
/** What a worker assumes when a task does not state the server's payload limit. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 4 * 1024 * 1024;
/** Room kept below max_request_bytes for the fields that change between calls. */
export const REQUEST_HEADROOM = 1024;

/**
 * Whether a run that goes on past `node`, with `buffered` results in its buffer (that step's
 * included), sends them now in a non-final AdvanceRun. A run that stops at this step never
 * flushes first: its final AdvanceRun carries the step.
 */
export function flushAfter(mode: ExecutionMode, node: GraphNode, buffered: number, batchSize: number): boolean {
  if (mode === "LOCAL_SYNC") {
    return true;
  }
  if (node.kind === "task" && node.checkpoint === true) {
    return true;
  }
  return buffered >= Math.max(1, batchSize);
}

/** The request limit a server derives from its payload limit. */
export function defaultMaxRequestBytes(maxPayloadBytes: number): number {
  return 4 * maxPayloadBytes + 1024 * 1024;
}

/** Whether a batch of this encoded size must not go as one request. */
export function overRequestLimit(requestBytes: number, maxRequestBytes: number): boolean {
  return requestBytes > maxRequestBytes - REQUEST_HEADROOM;
}
