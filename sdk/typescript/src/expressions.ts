/**
 * CEL expressions under the Wiggle profile (docs/expressions.md), on `@bufbuild/cel`.
 *
 * ```ts
 * const expr = compileExpression('ctx.amount_cents >= 1000000 && ctx.country != "NL"');
 * expr.evaluate(JSON.parse(body), { id: "i-1", flow: "invoices" }); // true
 * ```
 *
 * `ctx` is `dyn` and `instance` a `map(string, dyn)`; nothing else is declared. A context maps
 * to CEL by value: a number that is integral within +-(2^53 - 1) is an `int` (a `bigint` inside
 * the library), any other number a `double`. A result maps back to JSON: an `int` outside that
 * range, NaN, infinities, bytes, types and maps with non-string keys have no JSON form
 * (`not_json`); an integral `double` in range is written as an integer; timestamps and durations
 * become strings to the microsecond (truncated). A failure is an {@link EvaluationError} with
 * one of the profile's eight kinds.
 *
 * Where `@bufbuild/cel` 0.6.1 falls short of the profile, this module fills in:
 * - the math extension is missing: `math.greatest`, `math.least`, `math.ceil`, `math.floor`,
 *   `math.round`, `math.trunc`, `math.abs`, `math.sign` are custom functions here;
 * - the library's maps answer `has()` and `in` with false for a key whose value is null: the
 *   context's objects are wrapped in a map of this module that tells null from absent;
 * - the library reports a missing key and a field of a non-map alike (`field not found: k`):
 *   the wrapper notes each key it lacks, so only those are `no_such_key`;
 * - the library's `size` of a string is slow, and its `contains`, `indexOf` and `lastIndexOf`
 *   (V8's search) can take time quadratic in their strings: cel-strings.ts replaces them.
 *
 * The library has no checker in its public API, so a literal comparison of mixed types
 * (`1 == 1.0`) is not refused when compiled, and a type error shows only when evaluated. It has
 * no cost, iteration or time limit either: each comprehension's loop condition is wrapped here
 * in a call that counts the evaluation's iterations against the profile's budget
 * ({@link ITERATION_BUDGET}) and ends the evaluation once it has run longer than
 * {@link TIME_LIMIT_MS}, which the string functions of cel-strings.ts check too.
 */
import {
  CelScalar,
  celEnv,
  isCelError, isCelList, isCelMap, isCelType, isCelUint, mapType, parse, plan } from "@bufbuild/cel";
import type { CelFunc, CelList, CelMap, CelResult, CelUint, CelValue } from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";

import { SIZE_BUDGET, SIZE_FUNCS, SizeBudgetExceeded, count, countSizes, resetSizes } from "./expression-sizes.js";
import { EvaluationStop, checkClock, overload, startClock, variadic } from "./cel-func.js";
import { STRING_FUNCS, codePoints } from "./cel-strings.js";
import { JsonFloat, type Json } from "./json.js";

/** What an evaluation can fail with (docs/expressions.md, "Errors"). */
export const ERROR_KINDS = [
  "no_such_key",
  "type_mismatch",
  "division_by_zero",
  "overflow",
  "out_of_range",
  "invalid_argument",
  "not_json",
  "not_boolean",
] as const;
/** One of {@link ERROR_KINDS}. */
export type ErrorKind = (typeof ERROR_KINDS)[number];

/** The variables an expression may name. */
export const VARIABLES = ["ctx", "instance"] as const;

const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const MAX_SAFE_BIG = BigInt(MAX_SAFE);

/** An expression that failed when evaluated: a non-retryable failure of its node. */
export class EvaluationError extends Error {
  override name = "EvaluationError";
  constructor(
    readonly source: string,
    readonly kind: ErrorKind,
    readonly detail: string,
  ) {
    super(`expression '${source}' failed (${kind}): ${detail}`);
  }
}

/** An expression that CEL cannot parse or that names an undeclared variable; `line` and
 * `column` (1-based) locate the first problem inside it. */
export class ExpressionInvalid extends Error {
  override name = "ExpressionInvalid";
  constructor(
    readonly source: string,
    readonly line: number,
    readonly column: number,
    readonly detail: string,
  ) {
    super(`${line}:${column}: ${detail}`);
  }
}

/** What an expression evaluates against besides `ctx`. */
export interface Instance {
  id?: string;
  flow?: string;
  [key: string]: unknown;
}

/** A checked expression, ready to evaluate any number of times. */
export interface Expression {
  readonly source: string;
  /** The JSON value of the expression for this context (as `JSON.parse` or {@link decode}
   * gives it); {@link EvaluationError} when CEL fails or the result has no JSON form. */
  evaluate(ctx: unknown, instance?: Instance): Json;
  /** {@link Expression.evaluate} for a choice arm, filter or loop: the result must be a bool
   * (else `not_boolean`). */
  condition(ctx: unknown, instance?: Instance): boolean;
}

// ---------------------------------------------------------------------------------------------
// JSON -> CEL, lazily: a value is converted when the expression reaches it.

const MAP_MARK = Symbol.for("@bufbuild/cel/map");
const LIST_MARK = Symbol.for("@bufbuild/cel/list");

/** The keys an evaluation looked up and did not find (for telling `no_such_key`). */
type Misses = Set<string>;

/** A value that is not JSON inside the context (`undefined`, a function, a class instance). */
class NotAJsonValue extends Error {}

/** The profile's limit on comprehension iterations in one evaluation, across all its
 * comprehensions (docs/expressions.md, "Limits"); past it the evaluation fails with
 * invalid_argument. */
export const ITERATION_BUDGET = 10_000;

export { SIZE_BUDGET } from "./expression-sizes.js";
export { TIME_LIMIT_MS } from "./cel-func.js";

class IterationBudgetExceeded extends EvaluationStop {}

/** Iterations of the evaluation under way. Evaluations are synchronous and never nest, so one
 * counter serves them all; `compileExpression`'s evaluate resets it. */
let iterations = 0;

/** The internal function each comprehension's loop condition is wrapped in. `@` cannot start a
 * name in CEL's grammar, so no expression can call it itself. */
const ITERATION = "@wiggle_iteration";

const COUNT_ITERATION = overload(`${ITERATION}(dyn)`, ITERATION, (_target, [condition]) => {
  iterations += 1;
  if (iterations > ITERATION_BUDGET) {
    // Thrown, not returned: a CEL error would only become the accumulator, and the
    // comprehension would go on iterating.
    throw new IterationBudgetExceeded(`more than ${ITERATION_BUDGET} comprehension iterations in one evaluation`);
  }
  // Once per iteration: with the static rules, one iteration's work is bounded by the
  // expression's length and the context's size, so the evaluation ends at most that much late.
  checkClock();
  return condition;
});

function toCel(value: unknown, misses: Misses): unknown {
  switch (typeof value) {
    case "number":
      return Number.isSafeInteger(value) ? BigInt(value) : value;
    case "bigint":
      return value >= -MAX_SAFE_BIG && value <= MAX_SAFE_BIG ? value : Number(value);
    case "string":
    case "boolean":
      return value;
    case "object":
      if (value === null) return null;
      if (value instanceof JsonFloat || value instanceof Number) return toCel(value.valueOf(), misses);
      if (Array.isArray(value)) return new JsonList(value, misses);
      if (isPlainObject(value)) return new JsonMap(value as Record<string, unknown>, misses);
      break;
  }
  throw new NotAJsonValue(`not a JSON value: ${value === null ? "null" : typeof value}`);
}

function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

type MapKey = bigint | string | boolean | CelUint;

/** A JSON object as a CEL map: string keys, `has` true for a null value. */
class JsonMap implements ReadonlyMap<MapKey, CelValue> {
  readonly [MAP_MARK] = {};
  constructor(
    private readonly obj: Record<string, unknown>,
    private readonly misses: Misses,
  ) {}
  get size(): number {
    return Object.keys(this.obj).length;
  }
  get(key: MapKey | number): CelValue | undefined {
    if (typeof key === "string" && Object.hasOwn(this.obj, key)) {
      return toCel(this.obj[key], this.misses) as CelValue;
    }
    this.misses.add(isCelUint(key) ? String(key.value) : String(key));
    return undefined;
  }
  has(key: MapKey | number): boolean {
    return typeof key === "string" && Object.hasOwn(this.obj, key);
  }
  forEach(callback: (value: CelValue, key: MapKey, map: ReadonlyMap<MapKey, CelValue>) => void, thisArg?: unknown): void {
    for (const [k, v] of this.entries()) callback.call(thisArg, v, k, this);
  }
  *entries(): MapIterator<[MapKey, CelValue]> {
    for (const k of Object.keys(this.obj)) yield [k, toCel(this.obj[k], this.misses) as CelValue];
  }
  keys(): MapIterator<MapKey> {
    return Object.keys(this.obj)[Symbol.iterator]();
  }
  *values(): MapIterator<CelValue> {
    for (const k of Object.keys(this.obj)) yield toCel(this.obj[k], this.misses) as CelValue;
  }
  [Symbol.iterator](): MapIterator<[MapKey, CelValue]> {
    return this.entries();
  }
}

/** A JSON array as a CEL list. */
class JsonList {
  readonly [LIST_MARK] = {};
  constructor(
    private readonly array: readonly unknown[],
    private readonly misses: Misses,
  ) {}
  get size(): number {
    return this.array.length;
  }
  get(index: number): CelValue | undefined {
    if (index < 0 || index >= this.array.length) return undefined;
    return toCel(this.array[index], this.misses) as CelValue;
  }
  *values(): IterableIterator<CelValue> {
    for (const v of this.array) yield toCel(v, this.misses) as CelValue;
  }
  [Symbol.iterator](): IterableIterator<CelValue> {
    return this.values();
  }
}

// ---------------------------------------------------------------------------------------------
// CEL -> JSON

class NotJson extends Error {}

/** The JSON form of a result, counted against the size budget as it is copied out: a list of
 * many references to one large value is small for the library and huge once copied. */
function fromCel(value: unknown): Json {
  switch (typeof value) {
    case "string":
      count(codePoints(value));
      return value;
    case "boolean":
      return value;
    case "bigint":
      return intToJson(value);
    case "number":
      if (!Number.isFinite(value)) throw new NotJson(`the double ${value} has no JSON form`);
      // An integral double past ±(2^53 - 1) keeps its fraction in JSON (`9007199254740992.0`):
      // written as an integer, a reader in another language would take it for an exact one.
      if (Number.isInteger(value) && Math.abs(value) > Number.MAX_SAFE_INTEGER) return JsonFloat.of(value);
      return value === 0 ? 0 : value; // -0 is written as 0
    case "object":
      break;
    default:
      throw new NotJson(`a ${typeof value} value has no JSON form`);
  }
  if (value === null) return null;
  if (isCelUint(value)) return intToJson(value.value);
  if (value instanceof Uint8Array) throw new NotJson("a bytes value has no JSON form (convert it with string())");
  if (isCelType(value)) throw new NotJson(`the type ${value.name} has no JSON form`);
  if (isCelList(value)) {
    count((value as CelList).size);
    return Array.from(value as CelList, fromCel);
  }
  if (isCelMap(value)) {
    count((value as CelMap).size);
    const out: Record<string, Json> = {};
    for (const [k, v] of value as CelMap) {
      if (typeof k !== "string") {
        throw new NotJson(`a map key ${String(isCelUint(k) ? k.value : k)} is not a string; JSON object keys are`);
      }
      Object.defineProperty(out, k, { value: fromCel(v), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  const message = wkt(value);
  if (message?.type === "google.protobuf.Timestamp") return formatTimestamp(message.seconds, message.nanos);
  if (message?.type === "google.protobuf.Duration") return formatDuration(message.seconds, message.nanos);
  throw new NotJson(`a ${message?.type ?? "message"} value has no JSON form`);
}

function intToJson(value: bigint): number {
  if (value < -MAX_SAFE_BIG || value > MAX_SAFE_BIG) {
    throw new NotJson(`the integer ${value} is outside ±(2^53 - 1): JSON cannot carry it exactly`);
  }
  return Number(value);
}

/** A timestamp or duration as the library gives it (a reflected protobuf message). */
function wkt(value: object): { type: string; seconds: bigint; nanos: number } | undefined {
  const v = value as { desc?: { typeName?: unknown }; message?: { seconds?: unknown; nanos?: unknown } };
  const type = v.desc?.typeName;
  if (typeof type !== "string" || v.message === undefined) return undefined;
  return { type, seconds: BigInt(v.message.seconds as bigint), nanos: Number(v.message.nanos ?? 0) };
}

function fraction(micros: number): string {
  return micros === 0 ? "" : `.${String(micros).padStart(6, "0")}`.replace(/0+$/, "");
}

/** RFC 3339 in UTC with `Z`, the fraction (to microseconds, truncated) without trailing zeros. */
export function formatTimestamp(seconds: bigint, nanos: number): string {
  if (nanos < 0) {
    seconds -= 1n;
    nanos += 1_000_000_000;
  }
  const text = new Date(Number(seconds) * 1000).toISOString().slice(0, 19); // YYYY-MM-DDTHH:MM:SS
  return `${text}${fraction(Math.floor(nanos / 1000))}Z`;
}

/** Seconds with `s`, as CEL's duration() reads them: `90s`, `-1.5s`, `0.000001s`. */
export function formatDuration(seconds: bigint, nanos: number): string {
  const micros = seconds * 1_000_000n + BigInt(Math.trunc(nanos / 1000));
  const abs = micros < 0n ? -micros : micros;
  return `${micros < 0n ? "-" : ""}${abs / 1_000_000n}${fraction(Number(abs % 1_000_000n))}s`;
}

// ---------------------------------------------------------------------------------------------
// The math extension (cel-go's ext.Math, the profile's subset), missing from @bufbuild/cel.

type Num = bigint | number | CelUint;

function isNum(v: unknown): v is Num {
  return typeof v === "bigint" || typeof v === "number" || isCelUint(v);
}

function numValue(v: Num): number | bigint {
  return isCelUint(v) ? v.value : v;
}

/** `a < b` across int, uint and double, as CEL orders numbers. */
function less(a: Num, b: Num): boolean {
  const x = numValue(a);
  const y = numValue(b);
  if (typeof x === "bigint" && typeof y === "bigint") return x < y;
  return x < y; // JS compares a bigint with a number by value
}

function extreme(name: string, pick: (a: Num, b: Num) => boolean): CelFunc {
  return variadic(name, (args) => {
    let items: unknown[] = args;
    if (args.length === 1 && isCelList(args[0])) items = Array.from(args[0] as CelList);
    if (items.length === 0) throw new Error(`${name}(list) requires at least one argument`);
    let best: Num | undefined;
    for (const item of items) {
      if (!isNum(item)) {
        throw new Error(`found no matching overload for '${name}' applied to a ${describe(item)}`);
      }
      if (best === undefined || pick(item, best)) best = item;
    }
    return best as CelValue;
  });
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (isCelList(v)) return "list";
  if (isCelMap(v)) return "map";
  return typeof v;
}

function doubleFunc(name: string, f: (x: number) => number): CelFunc {
  return variadic(name, (args) => {
    const [x] = args;
    if (args.length !== 1 || typeof x !== "number") {
      throw new Error(`found no matching overload for '${name}' applied to '(${args.map(describe).join(", ")})'`);
    }
    return f(x);
  });
}

const INT64_MIN = -(2n ** 63n);

const MATH: CelFunc[] = [
  extreme("math.greatest", (a, b) => less(b, a)),
  extreme("math.least", (a, b) => less(a, b)),
  doubleFunc("math.ceil", Math.ceil),
  doubleFunc("math.floor", Math.floor),
  doubleFunc("math.round", (x) => (Number.isFinite(x) ? Math.sign(x) * Math.round(Math.abs(x)) : x)),
  doubleFunc("math.trunc", Math.trunc),
  variadic("math.abs", (args) => {
    const [x] = args;
    if (args.length === 1 && typeof x === "bigint") {
      if (x === INT64_MIN) throw new Error("int overflow during math.abs");
      return x < 0n ? -x : x;
    }
    if (args.length === 1 && (typeof x === "number" || isCelUint(x))) return typeof x === "number" ? Math.abs(x) : x;
    throw new Error(`found no matching overload for 'math.abs' applied to '(${args.map(describe).join(", ")})'`);
  }),
  variadic("math.sign", (args) => {
    const [x] = args;
    if (args.length === 1 && typeof x === "bigint") return x > 0n ? 1n : x < 0n ? -1n : 0n;
    if (args.length === 1 && typeof x === "number") return Number.isNaN(x) ? x : x > 0 ? 1 : x < 0 ? -1 : 0;
    if (args.length === 1 && isCelUint(x)) return x.value > 0n ? ({ ...x, value: 1n } as CelUint) : x;
    throw new Error(`found no matching overload for 'math.sign' applied to '(${args.map(describe).join(", ")})'`);
  }),
];

// ---------------------------------------------------------------------------------------------
// Compiling and evaluating

const VARS = { ctx: CelScalar.DYN, instance: mapType(CelScalar.STRING, CelScalar.DYN) };

let env: ReturnType<typeof celEnv<typeof VARS>> | undefined;

function theEnv(): ReturnType<typeof celEnv<typeof VARS>> {
  env ??= celEnv({ variables: VARS, funcs: [...strings, ...STRING_FUNCS, ...MATH, COUNT_ITERATION, ...SIZE_FUNCS] });
  return env;
}

/** The profile's kinds, by what the library's message says (first match wins). */
const KINDS: [ErrorKind, RegExp][] = [
  ["division_by_zero", /divide by zero|modulus by zero/],
  ["overflow", /overflow|duration out of range|timestamp out of range/],
  ["out_of_range", /out of bounds|index out of range|is greater than|start > end/],
  ["type_mismatch", /no matching overload|type mismatch|unsupported key type|unbound function/],
];

function kindOf(message: string, misses: Misses): ErrorKind {
  const field = /^field not found: (.*)$/s.exec(message);
  if (field) return misses.has(field[1] as string) ? "no_such_key" : "type_mismatch";
  for (const [kind, pattern] of KINDS) if (pattern.test(message)) return kind;
  return "invalid_argument";
}

type Node = ReturnType<typeof parse>["expr"];

/** The first identifier that names neither a variable nor a comprehension's own. */
function undeclared(node: Node | undefined, scope: ReadonlySet<string>): string | undefined {
  if (node === undefined) return undefined;
  const kind = node.exprKind;
  switch (kind.case) {
    case "identExpr":
      return scope.has(kind.value.name) ? undefined : kind.value.name;
    case "selectExpr":
      return undeclared(kind.value.operand, scope);
    case "callExpr": {
      const { target, args, function: fn } = kind.value;
      const namespaced = target?.exprKind.case === "identExpr" && target.exprKind.value.name === "math" && fn in MATH_NAMES;
      return (namespaced ? undefined : undeclared(target, scope)) ?? first(args, (a) => undeclared(a, scope));
    }
    case "listExpr":
      return first(kind.value.elements, (e) => undeclared(e, scope));
    case "structExpr":
      return first(kind.value.entries, (e) =>
        e.keyKind.case === "mapKey" ? (undeclared(e.keyKind.value, scope) ?? undeclared(e.value, scope)) : undeclared(e.value, scope),
      );
    case "comprehensionExpr": {
      const c = kind.value;
      const inner = new Set([...scope, c.iterVar, c.iterVar2, c.accuVar].filter((n) => n !== ""));
      const outer = new Set([...scope, c.accuVar]);
      return (
        undeclared(c.iterRange, scope) ??
        undeclared(c.accuInit, scope) ??
        undeclared(c.loopCondition, inner) ??
        undeclared(c.loopStep, inner) ??
        undeclared(c.result, outer)
      );
    }
    default:
      return undefined;
  }
}

const MATH_NAMES: Record<string, true> = Object.fromEntries(MATH.map((f) => [f.name.slice("math.".length), true]));

function first<T>(items: readonly T[], f: (item: T) => string | undefined): string | undefined {
  for (const item of items) {
    const found = f(item);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Wraps the loop condition of every comprehension under `node` in {@link ITERATION}, which
 * the library evaluates once per element visited (and once more where a condition stops the
 * loop early). */
function countIterations(node: Node | undefined): void {
  if (node === undefined) return;
  const kind = node.exprKind;
  switch (kind.case) {
    case "selectExpr":
      countIterations(kind.value.operand);
      return;
    case "callExpr":
      countIterations(kind.value.target);
      kind.value.args.forEach(countIterations);
      return;
    case "listExpr":
      kind.value.elements.forEach(countIterations);
      return;
    case "structExpr":
      for (const e of kind.value.entries) {
        if (e.keyKind.case === "mapKey") countIterations(e.keyKind.value);
        countIterations(e.value);
      }
      return;
    case "comprehensionExpr": {
      const c = kind.value;
      [c.iterRange, c.accuInit, c.loopCondition, c.loopStep, c.result].forEach(countIterations);
      const condition = c.loopCondition;
      if (condition !== undefined) {
        c.loopCondition = {
          ...condition,
          exprKind: {
            case: "callExpr",
            value: { $typeName: "cel.expr.Expr.Call", target: undefined, function: ITERATION, args: [condition] },
          },
        } as Node;
      }
      return;
    }
    default:
      return;
  }
}

/** Parses `source` and checks that it names only `ctx`, `instance` and its comprehensions'
 * variables; {@link ExpressionInvalid} otherwise. */
export function compileExpression(source: string): Expression {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(source);
  } catch (e) {
    const at = (e as { location?: { start?: { line?: number; column?: number } } }).location?.start;
    const message = e instanceof Error ? e.message.replace(/^<input>:\d+:\d+: /, "") : String(e);
    throw new ExpressionInvalid(source, at?.line ?? 1, at?.column ?? 1, `Syntax error: ${message}`);
  }
  const name = undeclared(parsed.expr, new Set(VARIABLES));
  if (name !== undefined) {
    throw new ExpressionInvalid(source, 1, 1, `undeclared reference to '${name}'`);
  }
  countSizes(parsed);
  countIterations(parsed.expr);
  const program = plan(theEnv(), parsed);
  const evaluate = (ctx: unknown, instance?: Instance): Json => {
    const misses: Misses = new Set();
    let result: CelResult;
    iterations = 0;
    startClock();
    resetSizes();
    try {
      result = program({
        ctx: toCel(ctx, misses) as never,
        instance: new JsonMap((instance ?? {}) as Record<string, unknown>, misses),
      });
    } catch (e) {
      if (e instanceof NotAJsonValue) throw new EvaluationError(source, "invalid_argument", e.message);
      throw e;
    }
    if (isCelError(result)) {
      // The library turns what the evaluation throws into an error value with it as the cause:
      // a spent budget, the time limit, a value in the context that is not JSON.
      const stopped = result.cause instanceof EvaluationStop || result.cause instanceof NotAJsonValue;
      throw new EvaluationError(source, stopped ? "invalid_argument" : kindOf(result.message, misses), result.message);
    }
    resetSizes(); // the result's copy has a budget of its own
    try {
      return fromCel(result);
    } catch (e) {
      if (e instanceof NotJson) throw new EvaluationError(source, "not_json", e.message);
      if (e instanceof SizeBudgetExceeded) {
        throw new EvaluationError(source, "not_json", `the result holds more than ${SIZE_BUDGET} characters, elements and entries`);
      }
      throw e;
    }
  };
  return {
    source,
    evaluate,
    condition(ctx: unknown, instance?: Instance): boolean {
      const value = evaluate(ctx, instance);
      if (typeof value !== "boolean") {
        throw new EvaluationError(source, "not_boolean", `a condition must be a bool; it gave ${JSON.stringify(value)}`);
      }
      return value;
    },
  };
}
