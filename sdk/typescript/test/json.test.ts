/** Lossless JSON: what a step passes through comes out as it came in (docs/worker-protocol.md). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { decode, depthOf, encode, JsonFloat, stringify, TooDeepError } from "../src/json.js";

const roundTrip = (text: string): string => stringify(decode(text));

describe("lossless JSON", () => {
  it("keeps integers beyond 2^53 and at the ends of the 64-bit ranges exact", () => {
    for (const n of ["9007199254740993", "-9007199254740993", "18446744073709551615", "-9223372036854775808", "9223372036854775807"]) {
      assert.equal(roundTrip(`{"n":${n}}`), `{"n":${n}}`);
      assert.equal(typeof (decode(n) as unknown), "bigint");
    }
    assert.equal(decode("9007199254740991"), 9007199254740991);
  });

  it("keeps a fraction a fraction and an integer an integer", () => {
    const text = '{"f":4.0,"g":1.5,"z":-0.0,"i":4,"zero":0,"list":[1,1.0,2.5],"neg":-3}';
    assert.equal(roundTrip(text), text);
    const v = decode("4.0");
    assert.ok(v instanceof JsonFloat);
    assert.equal((v as JsonFloat).valueOf() * 2, 8);
    assert.equal(stringify(JsonFloat.of(3)), "3.0");
  });

  it("re-prints other doubles in a form that reads back as the same double", () => {
    for (const [text, expected] of [
      ["1.0e+300", "1e+300"],
      ["5.0e-324", "5e-324"],
      ["1.0e2", "100.0"],
      ["1E3", "1000.0"],
      ["0.1", "0.1"],
      ["-2.5e-7", "-2.5e-7"],
    ] as const) {
      const out = roundTrip(text);
      assert.equal(out, expected);
      assert.equal(Number(out), Number(text));
    }
  });

  it("writes an integer -0 as 0 and what a handler computes by JavaScript's rule", () => {
    assert.equal(roundTrip("-0"), "0");
    assert.equal(stringify({ a: 2 * 2.5, b: 0.5 + 0.25, big: 2 ** 60 }), '{"a":5,"b":0.75,"big":1152921504606846976}');
    assert.equal(stringify([NaN, Infinity]), "[null,null]");
  });

  it("keeps strings, unicode and escapes", () => {
    const text = '{"s":"a\\"b\\\\c\\n\\u0001é😀","u":"\\u00e9"}';
    assert.deepEqual(decode(text), { s: 'a"b\\c\n\u0001é😀', u: "é" });
    assert.deepEqual(decode(stringify(decode(text))), decode(text));
  });

  it("reads __proto__ as an own member, never the prototype", () => {
    const v = decode('{"__proto__":{"polluted":1.5},"x":1.0}') as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(v), Object.prototype);
    assert.deepEqual(Object.keys(v), ["__proto__", "x"]);
    assert.equal(stringify(v), '{"__proto__":{"polluted":1.5},"x":1.0}');
  });

  it("encodes as JSON.stringify does otherwise, and measures depth", () => {
    assert.equal(stringify({ d: new Date(0), u: undefined, f: () => 1, arr: [undefined] }), '{"d":"1970-01-01T00:00:00.000Z","arr":[null]}');
    assert.equal(stringify(undefined), "null");
    assert.equal(encode({ a: [[1]] }).depth, 3);
    assert.equal(encode(1).depth, 0);
    const cyclic: Record<string, unknown> = {};
    cyclic["self"] = cyclic;
    assert.throws(() => stringify(cyclic), /contains itself/);
  });

  it("stops at a depth limit and measures the value however deep, without recursion", () => {
    let v: unknown = 1;
    for (let i = 0; i < 200_000; i++) {
      v = i % 2 === 0 ? [v] : { k: v };
    }
    assert.throws(
      () => encode(v, 128),
      (e: unknown) => e instanceof TooDeepError && e.depth === 200_000 && /nests 200000 levels deep; the limit is 128/.test(e.message),
    );
    assert.equal(encode([[1]], 2).text, "[[1]]");
    assert.equal(depthOf({ a: [[1]], b: { toJSON: () => [] } }), 3);
    assert.equal(depthOf(new Date(0)), 0);
    const cyclic: unknown[] = [];
    cyclic.push([cyclic]);
    assert.throws(() => depthOf(cyclic), /contains itself/);
  });

  it("refuses text that is not JSON, with where", () => {
    for (const bad of ["{", "[1,]", '{"a" 1}', "01", "1.", "tru", '"\\x"', "1 2", '{"a":1.5e}']) {
      assert.throws(() => decode(bad), /invalid JSON at offset \d+/, bad);
    }
    assert.equal(decode(""), null);
    assert.equal(decode(" \n 1.5 "), 1.5);
  });
});
