/**
 * Expression nodes in a local run (docs/worker-protocol.md, "Expression nodes in a run"): a
 * port of wiggle/expressions/_nodes.py. A `condition` gives its boolean; a `set` evaluates
 * every value against the same incoming context and replaces or adds those keys.
 */
import type { Outcome } from "./activity.js";
import {
  compileExpression,
  EvaluationError,
  ExpressionInvalid,
  type Expression,
  type Instance,
} from "./expressions.js";
import type { GraphNode } from "./graph.js";
import { decode, encode, JsonFloat, type Json, type JsonObject } from "./json.js";

/** The failure type of an expression node that errs (always non-retryable). */
export const EXPRESSION_ERROR_TYPE = "ExpressionError";

const CACHE_LIMIT = 4096;
const compiled = new Map<string, Expression | ExpressionInvalid>();

/** The compiled expression for `source`, compiled once per source. */
function expression(source: string): Expression {
  let found = compiled.get(source);
  if (found === undefined) {
    try {
      found = compileExpression(source);
    } catch (e) {
      if (!(e instanceof ExpressionInvalid)) {
        throw e;
      }
      found = e;
    }
    if (compiled.size >= CACHE_LIMIT) {
      compiled.clear();
    }
    compiled.set(source, found);
  }
  if (found instanceof ExpressionInvalid) {
    // A stored graph the compiler would refuse: the node fails, saying what the checker says.
    throw new EvaluationError(source, "invalid_argument", `does not compile: ${found.message}`);
  }
  return found;
}

/** Python's repr of a string, as the reference's failure message quotes the source. */
function quote(s: string): string {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = "";
  for (const ch of s) {
    if (ch === "\\") out += "\\\\";
    else if (ch === q) out += "\\" + q;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else out += ch;
  }
  return q + out + q;
}

/** `<kind>: <detail> (expression '<source>')`: starts with the kind in every language. */
export function failureMessage(e: EvaluationError): string {
  if (e.source === "") {
    return `${e.kind}: ${e.detail}`;
  }
  return `${e.kind}: ${e.detail} (expression ${quote(e.source)})`;
}

function typeName(v: Json): string {
  // The words every SDK uses for the context a set refused.
  if (v === null) return "null";
  if (Array.isArray(v)) return "a list";
  if (v instanceof JsonFloat) return "a number";
  switch (typeof v) {
    case "boolean":
      return "a boolean";
    case "string":
      return "a string";
    case "bigint":
    case "number":
      return "a number";
    default:
      return "an object";
  }
}

/**
 * The outcome of the condition or set `node` on the encoded context `input`: a predicate, the
 * new context (encoded as task results are), or a non-retryable ExpressionError failure.
 */
export function evaluateNode(node: GraphNode, input: Uint8Array, instance: Instance): Outcome {
  try {
    const ctx = decode(input);
    if (node.kind === "condition") {
      return { kind: "predicate", value: expression(node.if ?? "").condition(ctx, instance) };
    }
    if (typeof ctx !== "object" || ctx === null || Array.isArray(ctx) || ctx instanceof JsonFloat) {
      throw new EvaluationError(
        "",
        "type_mismatch",
        `set ${quote(node.id)} needs an object context; the context is ${typeName(ctx)}`,
      );
    }
    const values: JsonObject = {};
    for (const [key, source] of Object.entries(node.values ?? {})) {
      values[key] = expression(source).evaluate(ctx, instance);
    }
    const { text, depth } = encode({ ...ctx, ...values });
    return { kind: "context", json: Buffer.from(text, "utf8"), depth };
  } catch (e) {
    if (e instanceof EvaluationError) {
      return {
        kind: "failure",
        failure: { message: failureMessage(e), nonRetryable: true, errorType: EXPRESSION_ERROR_TYPE },
      };
    }
    throw e;
  }
}
