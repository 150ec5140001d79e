/**
 * Functions for @bufbuild/cel that can end an evaluation, shared by the profile's math and
 * string functions and the size budget's internal ones; and the evaluation's clock, for the
 * profile's time limit (docs/expressions.md, "The time limit").
 *
 * @module
 */
import { CelScalar, celError } from "@bufbuild/cel";
import type { CelFunc, CelResult, CelValue } from "@bufbuild/cel";

const FUNC_MARK = Symbol.for("@bufbuild/cel/func");

/** Thrown by a function to end the whole evaluation, rather than give a CEL error that `||`
 * or `?:` could set aside. */
export class EvaluationStop extends Error {}

/** A CelFunc for the library's overload `id` (`string.indexOf(string,int)`, which it replaces),
 * or of a name of its own: `impl` gets the target (undefined for a function) and the arguments,
 * and gives undefined where they are not its types. What `impl` throws becomes a CEL error,
 * except an {@link EvaluationStop} (the library's celFunc and celMethod catch everything). */
export function overload(
  id: string,
  name: string,
  impl: (target: CelValue | undefined, args: CelValue[]) => CelValue | undefined,
): CelFunc {
  const func = {
    [FUNC_MARK]: {},
    id,
    name,
    target: undefined,
    arguments: [],
    result: CelScalar.DYN,
    call(id: number, target: CelValue | undefined, args: CelValue[]): CelResult | undefined {
      try {
        return impl(target, args);
      } catch (e) {
        if (e instanceof EvaluationStop) throw e;
        return celError(e, id);
      }
    },
  };
  return func as unknown as CelFunc;
}

/** A function of any arity (the library's celFunc takes a fixed number of arguments). */
export function variadic(name: string, impl: (args: CelValue[]) => CelValue): CelFunc {
  return overload(`${name}(...)`, name, (target, args) => (target === undefined ? impl(args) : undefined));
}

/** The profile's limit on how long one evaluation may run, in milliseconds of the monotonic
 * clock (docs/expressions.md, "The time limit"): the budgets bound what an evaluation makes,
 * not how often a comprehension reads the context's largest values. */
export const TIME_LIMIT_MS = 1000;

/** The limit evaluations run under: TIME_LIMIT_MS, but in the SDK's tests (setTimeLimitMs). */
let timeLimitMs = TIME_LIMIT_MS;

/** Sets the limit of the evaluations that follow, answering the one it replaces. For the SDK's
 * tests, which run the evaluations that are not about the limit under a longer one; the package
 * does not export it. */
export function setTimeLimitMs(ms: number): number {
  const was = timeLimitMs;
  timeLimitMs = ms;
  return was;
}

class TimeLimitPassed extends EvaluationStop {}

/** When the evaluation under way must end (`performance.now()`). Evaluations are synchronous
 * and never nest, so one serves them all. */
let deadline = 0;

/** Starts an evaluation's clock. */
export function startClock(): void {
  deadline = performance.now() + timeLimitMs;
}

/** Ends the evaluation once it has run past the time limit. A clock read costs about 0.1 µs
 * (measured: a fifth of a light comprehension iteration). */
export function checkClock(): void {
  if (performance.now() > deadline) throw new TimeLimitPassed("the evaluation ran longer than 1 second");
}
