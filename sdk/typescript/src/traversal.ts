/**
 * The handback rule: after a worker step, where does the token go, and may the worker follow it?
 * A port of wiggle/traversal.py that must agree with it exactly; spec/conformance/traversal/
 * holds the vectors both pass (docs/worker-protocol.md, "Local runs").
 *
 * After a task, combine or apply the token moves to `next`; after a predicate to `next` (true)
 * or `alt` (false). The worker keeps going only while that node is a task or predicate on a
 * queue it serves, or an expression node (condition: moves like a predicate; set: like a task),
 * which it evaluates itself; anything else is a handback with a reason.
 */
import type { Graph, GraphNode, NodeKind } from "./graph.js";

/** Why a worker stops chaining and gives the token back: the wire's `handback_reason`. */
export type Handback =
  | "sleep"
  | "fork"
  | "join"
  | "foreach"
  | "await"
  | "subflow"
  | "end"
  | "other_queue"
  | "filtered"
  | "loop_limit"
  | "step_failed"
  | "lease_budget"
  | "shutdown"
  | "unknown_activity";

/** Loop counts: a loop's `while` predicate id -> how many times it returned true. */
export type LoopCounts = Readonly<Record<string, number>>;

/** Where a completed step sends its token. `next` is null when it does not continue. */
export interface Move {
  readonly next: string | null;
  readonly loopCounts: LoopCounts;
  /** null: keep going locally. */
  readonly handback: Handback | null;
}

const BOUNDARIES: Partial<Record<NodeKind, Handback>> = {
  sleep: "sleep",
  fork: "fork",
  join: "join",
  foreach: "foreach",
  await: "await",
  subflow: "subflow",
  end: "end",
};

/**
 * The node a completed step at `nodeId` leads to (a handback only for `filtered` and
 * `loop_limit`). `predicate` is the predicate's value, null for other steps. Throws when
 * `nodeId` is not a step a worker runs or a predicate's value is missing: a caller bug.
 */
export function successor(graph: Graph, nodeId: string, predicate: boolean | null, loopCounts: LoopCounts): Move {
  const counts: Record<string, number> = { ...loopCounts };
  const node = graph.nodes.get(nodeId);
  if (node === undefined) {
    throw new Error(`node "${nodeId}" is not a step a worker runs`);
  }
  switch (node.kind) {
    case "task":
    case "join":
    case "set":
      return { next: node.next ?? null, loopCounts: counts, handback: null };
    case "await":
      if (node.apply == null) {
        throw new Error(`await node "${nodeId}" has no apply step to complete`);
      }
      return { next: node.next ?? null, loopCounts: counts, handback: null };
    case "predicate":
    case "condition":
      break;
    default:
      throw new Error(`node "${nodeId}" is not a step a worker runs`);
  }
  if (predicate === null) {
    throw new Error(`predicate "${nodeId}" needs a boolean result`);
  }
  const max = node.max_iterations;
  if (predicate) {
    if (max != null) {
      // The body already ran once per true result plus the first pass; one more true result
      // would start iteration max_iterations + 1.
      const timesTrue = (counts[nodeId] ?? 0) + 1;
      if (timesTrue >= max) {
        return { next: null, loopCounts: counts, handback: "loop_limit" };
      }
      counts[nodeId] = timesTrue;
    }
    return { next: node.next ?? null, loopCounts: counts, handback: null };
  }
  if (max != null) {
    delete counts[nodeId]; // the loop exits: a later entry starts counting afresh
  }
  if (node.alt == null) {
    return { next: null, loopCounts: counts, handback: "filtered" };
  }
  return { next: node.alt, loopCounts: counts, handback: null };
}

/** null when a worker serving `queues` may run `next` itself, else why not. */
export function classify(graph: Graph, next: string, queues: readonly string[]): Handback | null {
  const node: GraphNode | undefined = graph.nodes.get(next);
  if (node === undefined) {
    return "end"; // unreachable on a parsed graph: every edge points at a node
  }
  const boundary = BOUNDARIES[node.kind];
  if (boundary !== undefined) {
    return boundary;
  }
  if (node.kind === "condition" || node.kind === "set") {
    return null; // the worker evaluates an expression node itself: never a handback
  }
  return queues.includes(node.queue ?? "") ? null : "other_queue";
}

/** {@link successor} then {@link classify}: the whole decision after one successful step. */
export function advance(
  graph: Graph,
  nodeId: string,
  queues: readonly string[],
  predicate: boolean | null,
  loopCounts: LoopCounts,
): Move {
  const move = successor(graph, nodeId, predicate, loopCounts);
  if (move.next === null) {
    return move;
  }
  return { ...move, handback: classify(graph, move.next, queues) };
}

/**
 * Whether enough of the lease remains to start another local step: at least a quarter of its
 * length, so the server never reclaims a lease from a worker that is still making progress.
 */
export function leaseBudgetLeft(remainingMs: number, leaseMs: number): boolean {
  return remainingMs * 4 >= leaseMs;
}
