/**
 * JSON values as Wiggle keeps them (docs/worker-protocol.md, "JSON values"), in plain JavaScript.
 *
 * Wiggle keeps an integer exactly within -2^63 .. 2^64 - 1 and tells `4` from `4.0`. JavaScript
 * has one number type, exact to 2^53, with no such distinction, so decoding maps:
 *
 * | JSON text                                  | JavaScript value                 |
 * |--------------------------------------------|----------------------------------|
 * | an integer within +-(2^53 - 1): `42`       | `number`                         |
 * | a larger integer: `9007199254740993`       | `bigint`                         |
 * | a non-integral fraction: `2.5`, `1e-7`     | `number`                         |
 * | an integral fraction: `4.0`, `-0.0`, `1e3` | {@link JsonFloat} (a `Number`)   |
 *
 * and encoding maps back: a `bigint` and an integral `number` are written as integers, a
 * {@link JsonFloat} and a non-integral `number` as numbers with a fraction or an exponent. A
 * value passed through a step therefore comes out as it came in. A `JsonFloat` is a `Number`
 * object: arithmetic and comparisons (`f * 2`, `f < 3`) work on it; what they compute is a plain
 * `number`, written as an integer when integral (JavaScript's own rule).
 *
 * Objects are plain objects; everything `JSON.stringify` accepts encodes as it would
 * (`toJSON`, skipped `undefined` members), except `NaN` and infinities, which are written as
 * `null` (there is no JSON for them).
 */

/** A JSON number written with a fraction or an exponent whose value is integral (`4.0`). */
export class JsonFloat extends Number {
  /** `value` as a JSON number that keeps its fraction: `JsonFloat.of(4)` encodes as `4.0`. */
  static of(value: number): JsonFloat {
    return new JsonFloat(value);
  }
}

/** Any JSON value in the form {@link decode} produces. */
export type Json = null | boolean | number | bigint | string | JsonFloat | Json[] | JsonObject;
/** A JSON object. */
export interface JsonObject {
  [key: string]: Json;
}

/** The nesting depth limit of a JSON value (docs/worker-protocol.md, "Limits"). */
export const MAX_DEPTH = 128;

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const TWO_64 = 2 ** 64;

/** Thrown for text that is not JSON. */
export class JsonSyntaxError extends SyntaxError {
  override name = "JsonSyntaxError";
}

/** Decodes UTF-8 JSON bytes (empty: `null`) without losing a number. */
export function decode(bytes: Uint8Array | string): Json {
  const text = typeof bytes === "string" ? bytes : Buffer.from(bytes).toString("utf8");
  if (text.length === 0) {
    return null;
  }
  if (plainNumbersOnly(text)) {
    try {
      return JSON.parse(text) as Json; // every number is a small integer: nothing to lose
    } catch {
      // the parser below says where the text goes wrong
    }
  }
  return new Parser(text).document();
}

// A string literal, or a number literal; numbers inside strings are skipped with the string.
const TOKENS = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;

/** True when every number in `text` is an integer literal that JSON.parse reads exactly. */
function plainNumbersOnly(text: string): boolean {
  TOKENS.lastIndex = 0;
  for (let m = TOKENS.exec(text); m !== null; m = TOKENS.exec(text)) {
    const token = m[0];
    const first = token.charCodeAt(0);
    if (first === 34 /* " */) {
      continue;
    }
    const digits = first === 45 /* - */ ? token.length - 1 : token.length;
    if (digits > 15 || /[.eE]/.test(token)) {
      return false;
    }
  }
  return true;
}

/** A number literal as its JavaScript value (see the table above). */
export function numberOf(literal: string): number | bigint | JsonFloat {
  const value = Number(literal);
  if (!/[.eE]/.test(literal)) {
    if (Number.isSafeInteger(value)) {
      return value === 0 ? 0 : value; // "-0" is the integer 0
    }
    return BigInt(literal);
  }
  if (Number.isInteger(value) || Object.is(value, -0) || !Number.isFinite(value)) {
    return new JsonFloat(value);
  }
  return value;
}

class Parser {
  private at = 0;

  constructor(private readonly text: string) {}

  document(): Json {
    const value = this.value(0);
    this.space();
    if (this.at !== this.text.length) {
      this.fail("unexpected text after the value");
    }
    return value;
  }

  private fail(why: string): never {
    throw new JsonSyntaxError(`invalid JSON at offset ${this.at}: ${why}`);
  }

  private space(): void {
    const t = this.text;
    while (this.at < t.length) {
      const c = t.charCodeAt(this.at);
      if (c !== 32 && c !== 9 && c !== 10 && c !== 13) {
        return;
      }
      this.at++;
    }
  }

  private value(depth: number): Json {
    if (depth > 10_000) {
      this.fail("nested too deeply");
    }
    this.space();
    const t = this.text;
    const c = t[this.at];
    switch (c) {
      case "{":
        return this.object(depth + 1);
      case "[":
        return this.array(depth + 1);
      case '"':
        return this.string();
      case "t":
        return this.word("true", true);
      case "f":
        return this.word("false", false);
      case "n":
        return this.word("null", null);
      default:
        return this.number();
    }
  }

  private word<T>(word: string, value: T): T {
    if (!this.text.startsWith(word, this.at)) {
      this.fail("unexpected character");
    }
    this.at += word.length;
    return value;
  }

  private number(): number | bigint | JsonFloat {
    NUMBER.lastIndex = this.at;
    const m = NUMBER.exec(this.text);
    if (m === null) {
      this.fail(this.at < this.text.length ? "unexpected character" : "unexpected end");
    }
    this.at += m[0].length;
    return numberOf(m[0]);
  }

  private string(): string {
    STRING.lastIndex = this.at;
    const m = STRING.exec(this.text);
    if (m === null) {
      this.fail("unterminated or invalid string");
    }
    this.at += m[0].length;
    return JSON.parse(m[0]) as string;
  }

  private array(depth: number): Json[] {
    this.at++; // [
    const out: Json[] = [];
    this.space();
    if (this.text[this.at] === "]") {
      this.at++;
      return out;
    }
    for (;;) {
      out.push(this.value(depth));
      this.space();
      const c = this.text[this.at++];
      if (c === "]") {
        return out;
      }
      if (c !== ",") {
        this.at--;
        this.fail("expected , or ]");
      }
    }
  }

  private object(depth: number): JsonObject {
    this.at++; // {
    const out: JsonObject = {};
    this.space();
    if (this.text[this.at] === "}") {
      this.at++;
      return out;
    }
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') {
        this.fail("expected a key");
      }
      const key = this.string();
      this.space();
      if (this.text[this.at++] !== ":") {
        this.at--;
        this.fail("expected :");
      }
      const value = this.value(depth);
      if (key === "__proto__") {
        // An own member, as JSON.parse makes it, never the prototype.
        Object.defineProperty(out, key, { value, writable: true, enumerable: true, configurable: true });
      } else {
        out[key] = value;
      }
      this.space();
      const c = this.text[this.at++];
      if (c === "}") {
        return out;
      }
      if (c !== ",") {
        this.at--;
        this.fail("expected , or }");
      }
    }
  }
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
// eslint-disable-next-line no-control-regex
const STRING = /"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/y;

/** An encoded value: its JSON text and how deeply it nests arrays and objects. */
export interface Encoded {
  readonly text: string;
  readonly depth: number;
}

/** Thrown for a value that has no JSON form (a cycle, a bare function or symbol). */
export class NotJsonError extends TypeError {
  override name = "NotJsonError";
}

/** Thrown by {@link encode} for a value nested deeper than its `maxDepth`. */
export class TooDeepError extends RangeError {
  override name = "TooDeepError";
  constructor(
    /** How deeply the value nests arrays and objects, however deep that is. */
    readonly depth: number,
    readonly limit: number,
  ) {
    super(`the value nests ${depth} levels deep; the limit is ${limit}`);
  }
}

/** The encoder went past its depth limit (measured again, without recursion, for the error). */
const OVER_LIMIT = Symbol("over the depth limit");

/**
 * Encodes `value` as JSON text, keeping integers, big integers and {@link JsonFloat}s apart
 * (see above). Top-level `undefined` encodes as `null` (a handler that returns nothing).
 * A value nested deeper than `maxDepth` throws {@link TooDeepError} with its depth, however
 * deep it is: the encoder stops at the limit, so no depth overflows the call stack.
 */
export function encode(value: unknown, maxDepth = Number.POSITIVE_INFINITY): Encoded {
  const e = new Encoder(maxDepth);
  let text: string | undefined;
  try {
    text = e.value(value, "", 0);
  } catch (err) {
    if (err === OVER_LIMIT) {
      throw new TooDeepError(depthOf(value), maxDepth);
    }
    throw err;
  }
  return { text: text ?? "null", depth: e.deepest };
}

/**
 * How deeply `value` nests arrays and objects once encoded (a scalar is 0, `[]` is 1), counted
 * without recursion, so at any depth. A value that contains itself throws {@link NotJsonError}.
 */
export function depthOf(value: unknown): number {
  interface Frame {
    readonly obj: object;
    readonly keys: readonly string[] | null; // null: an array
    readonly depth: number;
    next: number;
  }
  const frames: Frame[] = [];
  const path = new Set<object>();
  let deepest = 0;
  const enter = (v: unknown, key: string, depth: number): void => {
    const u = shaped(v, key);
    if (typeof u !== "object" || u === null || u instanceof JsonFloat) {
      return;
    }
    if (path.has(u)) {
      throw new NotJsonError("a value that contains itself has no JSON form");
    }
    path.add(u);
    deepest = Math.max(deepest, depth + 1);
    frames.push({ obj: u, keys: Array.isArray(u) ? null : Object.keys(u), depth: depth + 1, next: 0 });
  };
  enter(value, "", 0);
  for (let f = frames.at(-1); f !== undefined; f = frames.at(-1)) {
    const size = f.keys === null ? (f.obj as unknown[]).length : f.keys.length;
    if (f.next >= size) {
      frames.pop();
      path.delete(f.obj);
      continue;
    }
    const key = f.keys === null ? String(f.next) : (f.keys[f.next] as string);
    f.next++;
    enter((f.obj as Record<string, unknown>)[key], key, f.depth);
  }
  return deepest;
}

/** `v` as the encoder writes it: `toJSON` applied (once, as JSON.stringify does), unboxed. */
function shaped(v: unknown, key: string): unknown {
  if (typeof v !== "object" || v === null || v instanceof JsonFloat) {
    return v;
  }
  const toJSON = (v as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") {
    v = (toJSON as (k: string) => unknown).call(v, key);
    if (typeof v !== "object" || v === null || v instanceof JsonFloat) {
      return v;
    }
  }
  if (v instanceof Number || v instanceof String || v instanceof Boolean) {
    return v.valueOf();
  }
  return v;
}

/** `encode(value).text`. */
export function stringify(value: unknown): string {
  return encode(value).text;
}

/** A number as Wiggle reads it back: see the table at the top. */
export function formatNumber(n: number, float: boolean): string {
  if (!Number.isFinite(n)) {
    return "null";
  }
  if (!Number.isInteger(n)) {
    return String(n); // the shortest text that reads back as the same double
  }
  if (float) {
    if (Object.is(n, -0)) {
      return "-0.0";
    }
    const s = String(n);
    return /[.e]/.test(s) ? s : `${s}.0`;
  }
  if (Math.abs(n) <= MAX_SAFE) {
    return n === 0 ? "0" : String(n);
  }
  // An integral double beyond 2^53 is written as the exact integer it is (String() would
  // round its digits); beyond 64 bits the server reads integers as doubles anyway.
  return Math.abs(n) < TWO_64 ? BigInt(n).toString() : String(n);
}

class Encoder {
  deepest = 0;
  private readonly stack = new Set<object>();

  constructor(private readonly maxDepth: number) {}

  value(raw: unknown, key: string, depth: number): string | undefined {
    const v = shaped(raw, key);
    switch (typeof v) {
      case "string":
        return JSON.stringify(v);
      case "number":
        return formatNumber(v, false);
      case "bigint":
        return v.toString();
      case "boolean":
        return v ? "true" : "false";
      case "undefined":
      case "function":
      case "symbol":
        return undefined;
    }
    if (v === null) {
      return "null";
    }
    const obj = v as object;
    if (obj instanceof JsonFloat) {
      return formatNumber(obj.valueOf(), true);
    }
    if (this.stack.has(obj)) {
      throw new NotJsonError("a value that contains itself has no JSON form");
    }
    const level = depth + 1;
    if (level > this.maxDepth) {
      throw OVER_LIMIT;
    }
    if (level > this.deepest) {
      this.deepest = level;
    }
    this.stack.add(obj);
    try {
      if (Array.isArray(obj)) {
        const parts: string[] = [];
        for (let i = 0; i < obj.length; i++) {
          parts.push(this.value(obj[i], String(i), level) ?? "null");
        }
        return `[${parts.join(",")}]`;
      }
      const parts: string[] = [];
      for (const k of Object.keys(obj)) {
        const text = this.value((obj as Record<string, unknown>)[k], k, level);
        if (text !== undefined) {
          parts.push(`${JSON.stringify(k)}:${text}`);
        }
      }
      return `{${parts.join(",")}}`;
    } finally {
      this.stack.delete(obj);
    }
  }
}
