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
 * Indexes are UTF-16 code units, as the library's are.
 *
 * @module
 */
import type { CelFunc, CelValue } from "@bufbuild/cel";

import { checkClock, overload } from "./cel-func.js";

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

/** A start index of `indexOf(s, start)` and `lastIndexOf(s, start)`: the string's length
 * included, as in cel-go (the library refuses it). */
function startIndex(text: string, start: bigint): number {
  const i = Number(start);
  if (i < 0 || i > text.length) throw new Error(`index ${i} out of bounds [0, ${text.length}]`);
  return i;
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
  method("indexOf", ["string"], (s, p: string) => BigInt(indexOf(s, p))),
  method("indexOf", ["string", "int"], (s, p: string, start: bigint) => BigInt(indexOf(s, p, startIndex(s, start)))),
  method("lastIndexOf", ["string"], (s, p: string) => BigInt(lastIndexOf(s, p))),
  method("lastIndexOf", ["string", "int"], (s, p: string, start: bigint) => BigInt(lastIndexOf(s, p, startIndex(s, start)))),
];
