/**
 * The profile's size budget (docs/expressions.md, "The size budget"): what one evaluation makes
 * (a string by its code points, a list by its elements, a map by its entries) counts against
 * {@link SIZE_BUDGET}, and `replace` and `join` count their result before they make it.
 *
 * The library has no hook into an evaluation, so {@link countSizes} rewrites the parsed (macro
 * expanded) tree: each counted value is wrapped in an internal call that counts it and returns
 * it, and `replace` and `join` become internal functions that count first. The counting calls
 * throw past the budget, which ends the evaluation at once: a spent budget is not a CEL error
 * that `||` could set aside. Names starting with `@` cannot be written in CEL, so no expression
 * can call these itself.
 *
 * @module
 */
import type { CelFunc, CelList, CelValue, parse } from "@bufbuild/cel";
import { isCelList, isCelMap } from "@bufbuild/cel";

import { EvaluationStop, variadic } from "./cel-func.js";
import { codePoints, indexOf } from "./cel-strings.js";

/** The characters, elements and entries one evaluation may make in all. */
export const SIZE_BUDGET = 4_194_304;

export const OVER_SIZE_BUDGET = `the evaluation made more than ${SIZE_BUDGET} characters, elements and entries`;

export class SizeBudgetExceeded extends EvaluationStop {}

type Parsed = ReturnType<typeof parse>;
type Node = Parsed["expr"];

/** What the evaluation under way has made. Evaluations are synchronous and never nest. */
let spent = 0;

/** Starts an evaluation's count. */
export function resetSizes(): void {
  spent = 0;
}

/** Adds `size` to the evaluation's count; throws past the budget. */
export function count(size: number): void {
  spent += size;
  if (spent > SIZE_BUDGET) throw new SizeBudgetExceeded(OVER_SIZE_BUDGET);
}

function sizeOf(value: unknown): number {
  if (typeof value === "string") return codePoints(value);
  if (isCelList(value)) return (value as CelList).size;
  if (isCelMap(value)) return (value as ReadonlyMap<unknown, unknown>).size;
  return 0;
}

const SIZE = "@wiggle_size";
const STRING_SIZE = "@wiggle_string_size";
const STATIC_SIZE = "@wiggle_static_size";
const REPLACE = "@wiggle_replace";
const JOIN = "@wiggle_join";

function typeError(name: string, args: CelValue[]): Error {
  const kinds = args.map((a) => (typeof a === "string" ? "string" : typeof a === "bigint" ? "int" : typeof a));
  return new Error(`found no matching overload for '${name}' applied to '(${kinds.join(", ")})'`);
}

/** The strings extension's `replace`: the first `limit` (all when negative or absent)
 * non-overlapping occurrences of `old`, an empty `old` matching before every code point and
 * at the end; its size counted before it is made, its search linear (cel-strings.ts). */
function replace(args: CelValue[]): CelValue {
  const [text, old, repl, limit] = args;
  if (typeof text !== "string" || typeof old !== "string" || typeof repl !== "string" ||
      (args.length === 4 && typeof limit !== "bigint") || args.length < 3 || args.length > 4) {
    throw typeError("replace", args);
  }
  const cap = limit === undefined || (limit as bigint) < 0n ? Infinity : Number(limit);
  const points = Array.from(text);
  let found: number;
  if (old === "") {
    found = Math.min(points.length + 1, cap);
  } else {
    found = 0;
    for (let at = indexOf(text, old); at !== -1 && found < cap; at = indexOf(text, old, at + old.length)) found++;
  }
  count(codePoints(text) + found * (codePoints(repl) - codePoints(old)));
  if (old === "") {
    let out = "";
    for (let i = 0; i < points.length; i++) out += (i < found ? repl : "") + points[i];
    return out + (points.length < found ? repl : "");
  }
  let out = "";
  let from = 0;
  for (let n = 0; n < found; n++) {
    const at = indexOf(text, old, from);
    out += text.slice(from, at) + repl;
    from = at + old.length;
  }
  return out + text.slice(from);
}

/** The strings extension's `join`, its size counted before it is made. */
function join(args: CelValue[]): CelValue {
  const [list, sep = ""] = args;
  if (!isCelList(list) || typeof sep !== "string" || args.length > 2) throw typeError("join", args);
  const items: string[] = [];
  for (const item of list as CelList) {
    if (typeof item !== "string") throw new Error("found no matching overload for 'join': the list holds a non-string");
    items.push(item);
  }
  count(items.reduce((n, s) => n + codePoints(s), 0) + Math.max(items.length - 1, 0) * codePoints(sep));
  return items.join(sep);
}

/** The internal functions the rewritten tree calls; planned with the profile's own. */
export const SIZE_FUNCS: CelFunc[] = [
  variadic(SIZE, ([v]) => {
    count(sizeOf(v));
    return v as CelValue;
  }),
  variadic(STRING_SIZE, ([v]) => {
    if (typeof v === "string") count(codePoints(v));
    return v as CelValue;
  }),
  variadic(STATIC_SIZE, ([v, n]) => {
    count(Number(n));
    return v as CelValue;
  }),
  variadic(REPLACE, replace),
  variadic(JOIN, join),
];

const MAKERS = new Set(["lowerAscii", "upperAscii", "substring", "trim", "split"]);

/** Rewrites `parsed` in place so that every value the budget counts passes a counting call. */
export function countSizes(parsed: Parsed): void {
  const macros = new Map<string, string>();
  for (const [id, call] of Object.entries(parsed.sourceInfo?.macroCalls ?? {})) {
    if (call.exprKind.case === "callExpr") macros.set(String(id), call.exprKind.value.function);
  }
  visit(parsed.expr, macros, undefined, false);
}

interface Macro {
  accu: string;
  name: string | undefined;
}

function wrapped(node: Node, fn: string, extra: Node[] = []): void {
  const inner = { ...node } as Node;
  node.exprKind = {
    case: "callExpr",
    value: { $typeName: "cel.expr.Expr.Call", target: undefined, function: fn, args: [inner, ...extra] },
  } as Node["exprKind"];
}

function intNode(like: Node, n: number): Node {
  return {
    ...like,
    exprKind: {
      case: "constExpr",
      value: { $typeName: "cel.expr.Constant", constantKind: { case: "int64Value", value: BigInt(n) } },
    },
  } as Node;
}

function isNumber(node: Node | undefined): boolean {
  const k = node?.exprKind;
  if (k?.case !== "constExpr") return false;
  const c = k.value.constantKind.case;
  return c === "int64Value" || c === "uint64Value" || c === "doubleValue";
}

/** A literal made of literals only, and its entries (its inner literals' included). */
function constantEntries(node: Node | undefined): number | undefined {
  const k = node?.exprKind;
  if (k?.case === "constExpr") return 0;
  if (k?.case === "listExpr") {
    let n = k.value.elements.length;
    for (const e of k.value.elements) {
      const inner = constantEntries(e);
      if (inner === undefined) return undefined;
      n += inner;
    }
    return n;
  }
  if (k?.case === "structExpr" && k.value.messageName === "") {
    let n = k.value.entries.length;
    for (const e of k.value.entries) {
      const key = e.keyKind.case === "mapKey" ? constantEntries(e.keyKind.value) : undefined;
      const value = constantEntries(e.value);
      if (key === undefined || value === undefined) return undefined;
      n += key + value;
    }
    return n;
  }
  return undefined;
}

/** A literal's element or key, or what a map makes: a string counts its length (an inner
 * literal counts itself). */
function element(node: Node | undefined, macros: Map<string, string>, macro: Macro | undefined): void {
  if (node === undefined) return;
  visit(node, macros, macro, false);
  const k = node.exprKind;
  const scalar = k.case === "constExpr" && k.value.constantKind.case !== "stringValue";
  if (!scalar && k.case !== "listExpr" && k.case !== "structExpr") wrapped(node, STRING_SIZE);
}

function visit(node: Node | undefined, macros: Map<string, string>, macro: Macro | undefined, chainLeft: boolean): void {
  if (node === undefined) return;
  const kind = node.exprKind;
  switch (kind.case) {
    case "selectExpr":
      visit(kind.value.operand, macros, macro, false);
      return;
    case "callExpr": {
      const call = kind.value;
      const [first, second] = call.args;
      if (call.function === "_+_" && macro !== undefined && first?.exprKind.case === "identExpr" &&
          first.exprKind.value.name === macro.accu && second?.exprKind.case === "listExpr") {
        // A map's or filter's own step, `accu + [element]`: its list is the macro's, counted
        // with the macro's result; an element a map makes counts when it is a string.
        const [made] = second.exprKind.value.elements;
        if (macro.name === "map") element(made, macros, macro);
        else visit(made, macros, macro, false);
        return;
      }
      visit(call.target, macros, macro, false);
      call.args.forEach((a, i) => visit(a, macros, macro, call.function === "_+_" && i === 0));
      if (call.function === "_+_" && !chainLeft) {
        // A chain `a + b + c` counts once, as a whole; with a number in it, it makes a number.
        const terms: Node[] = [];
        let at: Node | undefined = node;
        while (at?.exprKind.case === "callExpr" && at.exprKind.value.function === "_+_") {
          terms.push(at.exprKind.value.args[1] as Node);
          at = at.exprKind.value.args[0];
        }
        if (at !== undefined) terms.push(at);
        if (!terms.some(isNumber)) wrapped(node, SIZE);
      } else if (call.target !== undefined && call.function === "replace" && (call.args.length === 2 || call.args.length === 3)) {
        call.args = [call.target, ...call.args];
        call.target = undefined;
        call.function = REPLACE;
      } else if (call.target !== undefined && call.function === "join" && call.args.length <= 1) {
        call.args = [call.target, ...call.args];
        call.target = undefined;
        call.function = JOIN;
      } else if (call.target !== undefined && MAKERS.has(call.function)) {
        wrapped(node, SIZE);
      }
      return;
    }
    case "listExpr":
    case "structExpr": {
      const entries = constantEntries(node);
      if (entries !== undefined) {
        wrapped(node, STATIC_SIZE, [intNode(node, entries)]);
        return;
      }
      if (kind.case === "listExpr") {
        kind.value.elements.forEach((e) => element(e, macros, macro));
      } else {
        for (const e of kind.value.entries) {
          if (e.keyKind.case === "mapKey") element(e.keyKind.value, macros, macro);
          element(e.value, macros, macro);
        }
      }
      wrapped(node, SIZE);
      return;
    }
    case "comprehensionExpr": {
      const c = kind.value;
      const name = macros.get(String(node.id));
      const inner: Macro = { accu: c.accuVar, name };
      visit(c.iterRange, macros, macro, false);
      visit(c.loopCondition, macros, inner, false);
      visit(c.loopStep, macros, inner, false);
      visit(c.result, macros, inner, false);
      if (name === "map" || name === "filter") wrapped(node, SIZE);
      return;
    }
    default:
      return;
  }
}
