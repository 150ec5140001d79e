/**
 * Functions of any arity for @bufbuild/cel, shared by the profile's math functions and the size
 * budget's internal ones.
 *
 * @module
 */
import { CelScalar, celError } from "@bufbuild/cel";
import type { CelFunc, CelResult, CelValue } from "@bufbuild/cel";

const FUNC_MARK = Symbol.for("@bufbuild/cel/func");

/** Thrown by a function to end the whole evaluation, rather than give a CEL error that `||`
 * or `?:` could set aside. */
export class EvaluationStop extends Error {}

/** A CelFunc of any arity (the library's celFunc takes a fixed number of arguments). What
 * `impl` throws becomes a CEL error, except an {@link EvaluationStop}. */
export function variadic(name: string, impl: (args: CelValue[]) => CelValue): CelFunc {
  const func = {
    [FUNC_MARK]: {},
    id: `${name}(...)`,
    name,
    target: undefined,
    arguments: [],
    result: CelScalar.DYN,
    call(id: number, target: CelValue | undefined, args: CelValue[]): CelResult | undefined {
      if (target !== undefined) return undefined;
      try {
        return impl(args);
      } catch (e) {
        if (e instanceof EvaluationStop) throw e;
        return celError(e, id);
      }
    },
  };
  return func as unknown as CelFunc;
}
