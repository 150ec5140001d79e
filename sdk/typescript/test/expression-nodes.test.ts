import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { evaluateNode } from "../src/expression-nodes.js";
import type { GraphNode } from "../src/graph.js";

const inst = { id: "i-1", flow: "f" };
const ctx = (s: string) => Buffer.from(s, "utf8");

describe("expression nodes", () => {
  it("a condition gives its boolean", () => {
    const n: GraphNode = { id: "c", kind: "condition", if: "ctx.n > 1", next: "x", alt: null };
    assert.deepEqual(evaluateNode(n, ctx('{"n":2}'), inst), { kind: "predicate", value: true });
    assert.deepEqual(evaluateNode(n, ctx('{"n":0}'), inst), { kind: "predicate", value: false });
  });
  it("a non-boolean condition fails with not_boolean", () => {
    const n: GraphNode = { id: "c", kind: "condition", if: "ctx.n", next: "x" };
    const out = evaluateNode(n, ctx('{"n":2}'), inst);
    assert.equal(out.kind, "failure");
    if (out.kind === "failure") {
      assert.match(out.failure.message, /^not_boolean: .* \(expression 'ctx\.n'\)$/);
      assert.equal(out.failure.nonRetryable, true);
      assert.equal(out.failure.errorType, "ExpressionError");
    }
  });
  it("a set evaluates every value against the same context, keeping exact numbers", () => {
    const n: GraphNode = { id: "s", kind: "set", values: { a: "ctx.a + 1", b: "ctx.a", id: "instance.id" }, next: "x" };
    const out = evaluateNode(n, ctx('{"a":1,"big":12345678901234567890,"f":4.0}'), inst);
    assert.equal(out.kind, "context");
    if (out.kind === "context") {
      assert.equal(out.json.toString("utf8"), '{"a":2,"big":12345678901234567890,"f":4.0,"b":1,"id":"i-1"}');
    }
  });
  it("a set writes an integral double past 2^53 with its fraction, and a small one as an integer", () => {
    const values = { d: "9007199254740992.0 * 2.0", e: "double(ctx.a) * 0.5", g: "2.0 * 3.0" };
    const n: GraphNode = { id: "s", kind: "set", values, next: "x" };
    const out = evaluateNode(n, ctx('{"a":1}'), inst);
    assert.equal(out.kind, "context");
    if (out.kind === "context") {
      // Written as 18014398509481984, Python, Go and Java would read an exact integer back.
      assert.equal(out.json.toString("utf8"), '{"a":1,"d":18014398509481984.0,"e":0.5,"g":6}');
    }
  });
  it("a set on a context that is not an object fails with type_mismatch", () => {
    const n: GraphNode = { id: "s", kind: "set", values: { a: "1" }, next: "x" };
    const out = evaluateNode(n, ctx("[1]"), inst);
    assert.equal(out.kind, "failure");
    if (out.kind === "failure") {
      assert.match(out.failure.message, /^type_mismatch: /);
    }
  });
  it("a missing key fails with no_such_key", () => {
    const n: GraphNode = { id: "c", kind: "condition", if: "ctx.missing", next: "x" };
    const out = evaluateNode(n, ctx("{}"), inst);
    assert.ok(out.kind === "failure" && out.failure.message.startsWith("no_such_key: "));
  });
});
