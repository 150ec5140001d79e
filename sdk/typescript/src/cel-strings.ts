/**
 * The string functions that read a whole string, in place of @bufbuild/cel's (docs/expressions.md,
 * "The time limit"). Each reads the clock first, so that an evaluation that makes many such
 * calls outside any comprehension also ends soon after the limit, and none takes long:
 *
 * - `size` of a string: the library spreads the string into an array to count its code points
 *   (30 ms for 2 MB); {@link codePoints} counts them in place, about three times faster.
 * - `contains`, `indexOf`, `lastIndexOf`: V8's own search can take time quadratic in the
 *   strings. In a string of n `a`s, `indexOf` of k `a`s, a `b` and k `a`s does, and so does
 *   `lastIndexOf` of k `a`s and a `b` (0.5 s and 1.2 s for n = 80,000 and k = n / 4 and n / 2;
 *   minutes for 2 MB). A long pattern is searched here with Knuth-Morris-Pratt, linear in both
 *   strings.
 *
 * - `split`: V8's own is quadratic on the same patterns (2 s to split 200,000 `a`s on a miss in
 *   the middle); here it is a loop of {@link indexOf}, linear in its strings.
 * - `charAt`, `substring`: the library's count UTF-16 code units, and can cut a surrogate pair.
 *
 * CEL counts a string's indexes in code points (`'😀ab'.indexOf('b')` is 2): every function
 * here takes and gives code points, a surrogate pair one and a lone surrogate (which JSON allows)
 * one. {@link indexOf} and {@link lastIndexOf} themselves, which `replace` uses too, search in
 * UTF-16 code units, as V8's do; the CEL functions convert their offsets, in linear time.
 *
 * @module
 */
import { celList } from "@bufbuild/cel";
import type { CelFunc, CelValue } from "@bufbuild/cel";

import { checkClock, overload } from "./cel-func.js";

/** The UTF-16 code units of the code point at unit `i` of `s`: 2 for a surrogate pair, else 1. */
function width(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
    const d = s.charCodeAt(i + 1);
    if (d >= 0xdc00 && d <= 0xdfff) return 2;
  }
  return 1;
}

/** A string's length in code points (a surrogate pair is one). */
export function codePoints(s: string): number {
  let n = s.length;
  const last = s.length - 1;
  for (let i = 0; i < last; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n -= 1;
        i += 1;
      }
    }
  }
  return n;
}

/** Patterns up to this length are left to V8's search: its work per character of the text is
 * at most the pattern's length, and it is far faster than {@link kmp} (a memchr for one). */
const SHORT_PATTERN = 32;

/** Knuth-Morris-Pratt: where `pattern` first occurs in `text` read from `start` in direction
 * `dir` (1 forward, -1 backward), as the index its first unit is at; -1 if nowhere. Linear in
 * both strings. */
function kmp(text: string, pattern: string, start: number, dir: 1 | -1): number {
  const m = pattern.length;
  // The pattern's units in reading order, and border[j]: the length of the longest proper prefix
  // of its first j + 1 units that is also a suffix of them.
  const p = new Uint16Array(m);
  for (let j = 0; j < m; j++) p[j] = pattern.charCodeAt(dir === 1 ? j : m - 1 - j);
  const border = new Int32Array(m);
  for (let j = 1, k = 0; j < m; j++) {
    while (k > 0 && p[k] !== p[j]) k = border[k - 1] as number;
    if (p[k] === p[j]) k++;
    border[j] = k;
  }
  for (let i = start, k = 0; i >= 0 && i < text.length; i += dir) {
    const c = text.charCodeAt(i);
    while (k > 0 && p[k] !== c) k = border[k - 1] as number;
    if (p[k] === c && ++k === m) return dir === 1 ? i - m + 1 : i;
  }
  return -1;
}

/** `text.indexOf(pattern, from)`, in time linear in both strings. */
export function indexOf(text: string, pattern: string, from = 0): number {
  return pattern.length <= SHORT_PATTERN ? text.indexOf(pattern, from) : kmp(text, pattern, from, 1);
}

/** `text.lastIndexOf(pattern, from)`, in time linear in both strings. */
export function lastIndexOf(text: string, pattern: string, from = text.length): number {
  if (pattern.length <= SHORT_PATTERN) return text.lastIndexOf(pattern, from);
  // Read backwards from the last unit a match starting at `from` would cover.
  return kmp(text, pattern, Math.min(from + pattern.length, text.length) - 1, -1);
}

/** The code points of `s` between UTF-16 units `from` and `to` (each where a code point starts). */
function pointsBetween(s: string, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i += width(s, i)) n++;
  return n;
}

/** The UTF-16 unit where code point `point` of `s` starts (`s.length` for its size), or -1 when
 * `point` is outside 0..size. */
function unitAt(s: string, point: number): number {
  if (point < 0) return -1;
  let i = 0;
  for (let n = 0; n < point; n++) {
    if (i >= s.length) return -1;
    i += width(s, i);
  }
  return i;
}

/** The unit of code point `point` of `text`, which must be within 0..size: the size included,
 * as in cel-spec (the library refuses it). */
function unitIndex(text: string, point: bigint): number {
  const i = unitAt(text, Number(point));
  if (i === -1) throw new Error(`index ${point} out of bounds [0, ${codePoints(text)}]`);
  return i;
}

/** A UTF-16 index where a match starts, in code points; -1 stays -1. */
function pointIndex(text: string, unit: number, from = 0, fromPoint = 0): bigint {
  return BigInt(unit === -1 ? -1 : fromPoint + pointsBetween(text, from, unit));
}

/** CEL's `indexOf`, in code points. */
function celIndexOf(text: string, pattern: string, start?: bigint): bigint {
  if (start === undefined) return pointIndex(text, indexOf(text, pattern));
  const from = unitIndex(text, start);
  return pointIndex(text, indexOf(text, pattern, from), from, Number(start));
}

/** CEL's `lastIndexOf`, in code points: the last match that starts at `start` or before. */
function celLastIndexOf(text: string, pattern: string, start?: bigint): bigint {
  const at = start === undefined ? lastIndexOf(text, pattern) : lastIndexOf(text, pattern, unitIndex(text, start));
  return pointIndex(text, at);
}

/** CEL's `charAt`: the code point at `index`, or `''` at the end. */
function charAt(text: string, index: bigint): string {
  const i = unitIndex(text, index);
  return i === text.length ? "" : text.slice(i, i + width(text, i));
}

/** CEL's `substring`, in code points. */
function substring(text: string, start: bigint, end?: bigint): string {
  const i = unitIndex(text, start);
  if (end === undefined) return text.slice(i);
  const j = unitIndex(text, end);
  if (start > end) throw new Error(`substring: start > end (${start} > ${end})`);
  return text.slice(i, j);
}

/** CEL's `split`: with a count `n`, none for 0, all for a negative one, else at most `n` parts,
 * the last holding the rest; an empty separator splits between code points, and an empty string
 * split on it is `['']`. Linear in the strings: each search starts where the last match ended. */
export function split(text: string, separator: string, n = -1n): string[] {
  if (n === 0n) return [];
  const most = n < 0n ? Infinity : Number(n);
  const parts: string[] = [];
  let from = 0;
  if (separator === "") {
    if (text === "") return [""];
    while (from < text.length && parts.length < most - 1) {
      const to = from + width(text, from);
      parts.push(text.slice(from, to));
      from = to;
    }
    if (from < text.length) parts.push(text.slice(from));
    return parts;
  }
  while (parts.length < most - 1) {
    const at = indexOf(text, separator, from);
    if (at === -1) break;
    parts.push(text.slice(from, at));
    from = at + separator.length;
  }
  parts.push(text.slice(from));
  return parts;
}

/** The library's overload of `name` on a string with arguments of these types (its id, such as
 * `string.indexOf(string,int)`, is the one it replaces), reading the clock first. */
function method<A extends CelValue[]>(name: string, types: ("string" | "int")[], impl: (s: string, ...args: A) => CelValue): CelFunc {
  const js = types.map((t) => (t === "int" ? "bigint" : "string"));
  return overload(`string.${name}(${types.join(",")})`, name, (target, args) => {
    if (typeof target !== "string" || args.length !== js.length || args.some((a, i) => typeof a !== js[i])) return undefined;
    checkClock();
    return impl(target, ...(args as A));
  });
}

/** Planned after the library's own, which they replace. */
export const STRING_FUNCS: CelFunc[] = [
  overload("size(string)", "size", (target, [s, ...rest]) => {
    if (target !== undefined || typeof s !== "string" || rest.length > 0) return undefined;
    checkClock();
    return BigInt(codePoints(s));
  }),
  method("size", [], (s) => BigInt(codePoints(s))),
  method("contains", ["string"], (s, p: string) => indexOf(s, p) !== -1),
  method("indexOf", ["string"], (s, p: string) => celIndexOf(s, p)),
  method("indexOf", ["string", "int"], (s, p: string, start: bigint) => celIndexOf(s, p, start)),
  method("lastIndexOf", ["string"], (s, p: string) => celLastIndexOf(s, p)),
  method("lastIndexOf", ["string", "int"], (s, p: string, start: bigint) => celLastIndexOf(s, p, start)),
  method("charAt", ["int"], (s, i: bigint) => charAt(s, i)),
  method("substring", ["int"], (s, i: bigint) => substring(s, i)),
  method("substring", ["int", "int"], (s, i: bigint, j: bigint) => substring(s, i, j)),
  method("split", ["string"], (s, sep: string) => celList(split(s, sep))),
  method("split", ["string", "int"], (s, sep: string, n: bigint) => celList(split(s, sep, n))),
];
