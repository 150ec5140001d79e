/**
 * The canonical graph (docs/graph.md): the JSON a server returns from GetDefinition, byte for
 * byte the form whose SHA-256 is the flow's version. Only what a worker walks is typed.
 *
 * Edges are named on the node that owns them: a task's, join's, sleep's, await's and subflow's
 * `next`; a predicate's `next` (true) and `alt` (false; null on a filter); a fork's `branches`
 * and `join`; a foreach's `body` and `join`; an await's `on_timeout`.
 */
import { createHash } from "node:crypto";

/** What a node does. */
export type NodeKind =
  | "task"
  | "predicate"
  | "fork"
  | "join"
  | "foreach"
  | "sleep"
  | "await"
  | "subflow"
  | "condition"
  | "set"
  | "end";

/** Who drives a run of steps: the server, or the worker (docs/flow-format.md). */
export type ExecutionMode = "SERVER" | "LOCAL_SYNC" | "LOCAL_ASYNC";

/** The activity an await runs on `{"context": ..., "signal": ...}`. */
export interface Apply {
  readonly activity: string;
  readonly queue: string;
  readonly timeout_ms: number;
}

/** One node. Which fields are set depends on `kind`; the canonical form carries all of them. */
export interface GraphNode {
  readonly id: string;
  readonly kind: NodeKind;
  readonly activity?: string;
  readonly queue?: string;
  readonly timeout_ms?: number;
  readonly next?: string;
  readonly checkpoint?: boolean;
  readonly alt?: string | null;
  readonly max_iterations?: number | null;
  readonly branches?: Readonly<Record<string, string>>;
  readonly join?: string;
  readonly fork?: string;
  readonly body?: string;
  readonly on_timeout?: string | null;
  readonly apply?: Apply | null;
  /** A condition's CEL expression (docs/expressions.md). */
  readonly if?: string;
  /** A set's values: key -> CEL source, each evaluated against the incoming context. */
  readonly values?: Readonly<Record<string, string>>;
}

/** A compiled flow: its identity and its nodes by id. */
export interface Graph {
  readonly name: string;
  /** `sha256:<64 hex>` of the canonical bytes. */
  readonly version: string;
  readonly start: string;
  readonly nodes: ReadonlyMap<string, GraphNode>;
}

/** `sha256:` + the hex SHA-256 of canonical graph bytes: the version they are. */
export function versionOf(canonical: Uint8Array): string {
  return `sha256:${createHash("sha256").update(canonical).digest("hex")}`;
}

/** Whether a worker runs this node: a task, predicate, join (its combine), await with apply. */
export function isWorkerStep(node: GraphNode): boolean {
  switch (node.kind) {
    case "task":
    case "predicate":
    case "join":
      return true;
    case "await":
      return node.apply != null;
    default:
      return false;
  }
}

/** The activity a worker runs at this node ("" when none). */
export function stepActivity(node: GraphNode): string {
  if (node.kind === "await") {
    return node.apply?.activity ?? "";
  }
  return node.activity ?? "";
}

/** The step's timeout at this node: the lease length the server grants for it. */
export function stepTimeoutMs(node: GraphNode): number {
  if (node.kind === "await") {
    return node.apply?.timeout_ms ?? 0;
  }
  return node.timeout_ms ?? 0;
}

const KINDS = new Set<string>(["task", "predicate", "fork", "join", "foreach", "sleep", "await", "subflow", "condition", "set", "end"]);

/** Whether the worker evaluates this node itself in a local run: a condition or a set. */
export function isExpressionNode(node: GraphNode): boolean {
  return node.kind === "condition" || node.kind === "set";
}

/** Thrown for bytes that are not a canonical graph a worker can walk. */
export class GraphError extends Error {
  override name = "GraphError";
}

/**
 * Reads canonical graph bytes and checks that they are well formed: known kinds, the fields
 * each kind needs, every edge pointing at a node that exists. Only structure is checked: a
 * worker trusts the server's compiler and only needs to walk the graph without a dangling edge.
 */
export function parseGraph(canonical: Uint8Array): Graph {
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(canonical).toString("utf8"));
  } catch (e) {
    throw new GraphError(`not a canonical graph: ${(e as Error).message}`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw new GraphError("not a canonical graph: not an object");
  }
  const d = doc as Record<string, unknown>;
  if (d["format"] !== 1) {
    throw new GraphError(`unsupported format ${JSON.stringify(d["format"])}`);
  }
  const raw = d["nodes"];
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new GraphError("nodes is not an object");
  }
  const nodes = new Map<string, GraphNode>();
  for (const [id, n] of Object.entries(raw as Record<string, unknown>)) {
    if (typeof n !== "object" || n === null || Array.isArray(n)) {
      throw new GraphError(`node "${id}" is not an object`);
    }
    nodes.set(id, { ...(n as Omit<GraphNode, "id">), id });
  }
  const start = d["start"];
  if (typeof start !== "string" || !nodes.has(start)) {
    throw new GraphError(`start node ${JSON.stringify(start)} does not exist`);
  }
  for (const id of [...nodes.keys()].sort()) {
    const problem = check(nodes, nodes.get(id) as GraphNode);
    if (problem !== undefined) {
      throw new GraphError(`node "${id}": ${problem}`);
    }
  }
  return { name: String(d["name"]), version: versionOf(canonical), start, nodes };
}

function check(nodes: Map<string, GraphNode>, n: GraphNode): string | undefined {
  const edges: unknown[] = [];
  if (!KINDS.has(n.kind)) {
    return `unknown kind ${JSON.stringify(n.kind)}`;
  }
  switch (n.kind) {
    case "task":
    case "predicate":
    case "join":
      if (typeof n.activity !== "string" || n.activity === "" || typeof n.queue !== "string" || n.queue === "") {
        return `${n.kind} needs activity and queue`;
      }
      edges.push(n.next);
      if (n.alt != null) {
        edges.push(n.alt);
      }
      if (n.kind === "join") {
        edges.push(n.fork);
      }
      break;
    case "fork":
      if (n.branches == null || Object.keys(n.branches).length === 0) {
        return "fork without branches";
      }
      edges.push(...Object.values(n.branches), n.join);
      break;
    case "foreach":
      edges.push(n.body, n.join);
      break;
    case "sleep":
    case "subflow":
      edges.push(n.next);
      break;
    case "await":
      edges.push(n.next);
      if (n.on_timeout != null) {
        edges.push(n.on_timeout);
      }
      if (n.apply != null && (!n.apply.activity || !n.apply.queue)) {
        return "await apply needs activity and queue";
      }
      break;
    case "condition":
      if (typeof n.if !== "string" || n.if === "") {
        return "condition needs if";
      }
      edges.push(n.next);
      if (n.alt != null) {
        edges.push(n.alt);
      }
      break;
    case "set":
      if (typeof n.values !== "object" || n.values === null || Array.isArray(n.values)) {
        return "set needs values";
      }
      for (const v of Object.values(n.values)) {
        if (typeof v !== "string") {
          return "set values must be expressions";
        }
      }
      edges.push(n.next);
      break;
    case "end":
      break;
  }
  for (const to of edges) {
    if (typeof to !== "string" || !nodes.has(to)) {
      return `edge to ${JSON.stringify(to)}, which does not exist`;
    }
  }
  return undefined;
}
