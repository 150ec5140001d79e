/** Handlers, and how one step's run becomes an outcome the worker reports. */
import { decode, encode, MAX_DEPTH, TooDeepError, type Json } from "./json.js";
import { DEFAULT_MAX_PAYLOAD_BYTES } from "./policy.js";
import { NonRetryableError, type Step } from "./step.js";

/**
 * A task handler (also a join's combine and an await's `apply`): receives the context, returns
 * the next context. `In` is what you expect the context to be; it is not checked.
 */
export type Activity<In = Json, Out = unknown> = (input: In, step: Step) => Out | Promise<Out>;

/** A predicate handler (filter, choice arm, loop `while`): returns the branch to take. */
export type Predicate<In = Json> = (input: In, step: Step) => boolean | Promise<boolean>;

/** Any registered handler, as the worker calls it. */
export type Handler = (input: Json, step: Step) => unknown;

const ACTIVITY_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}$/;

/** Why `name` cannot be an activity name (the flow format's rule), or undefined. */
export function badActivityName(name: string): string | undefined {
  if (typeof name !== "string" || !ACTIVITY_NAME.test(name)) {
    return (
      `activity name ${JSON.stringify(name)} is not 1 to 200 characters of [A-Za-z0-9_.-] ` +
      "starting with a letter, digit or _"
    );
  }
  return undefined;
}

/** A step's failure, as the wire's StepFailure. */
export interface Failure {
  readonly message: string;
  readonly nonRetryable: boolean;
  readonly errorType: string;
}

/** What one step produced. */
export type Outcome =
  | { readonly kind: "context"; readonly json: Buffer; readonly depth: number }
  | { readonly kind: "predicate"; readonly value: boolean }
  | {
      readonly kind: "failure";
      readonly failure: Failure;
      /** The handler gave up because the worker drains (abortStepsOnDrain): give it back. */
      readonly interrupted?: boolean;
    };

function failed(message: string, errorType: string, nonRetryable = false): Outcome {
  return { kind: "failure", failure: { message, nonRetryable, errorType } };
}

/** The failure a thrown value stands for. */
export function failureOf(e: unknown): Failure {
  if (e instanceof Error) {
    const type = e.name !== "Error" ? e.name : (e.constructor?.name ?? "Error");
    return {
      message: e.message !== "" ? e.message : type,
      nonRetryable: e instanceof NonRetryableError,
      errorType: type,
    };
  }
  return { message: String(e), nonRetryable: false, errorType: typeof e };
}

/**
 * Runs one step and turns whatever happens (a throw, a rejected promise, a result with no JSON
 * form) into an outcome, so no handler mistake escapes into the worker's own loops.
 * `asPredicate`: the node is a predicate, so a boolean is its value; anything else stays a
 * context, which the server fails as it fails a SERVER-mode CompleteTask with a non-boolean.
 * `interrupted` says, after a throw, whether the worker's drain made the handler give up.
 * A result nested deeper than `maxDepth` fails on the depth limit, however deep it is.
 */
export async function runHandler(
  handler: Handler | undefined,
  name: string,
  input: Uint8Array,
  step: Step,
  asPredicate: boolean,
  interrupted: () => boolean,
  maxDepth = MAX_DEPTH,
): Promise<Outcome> {
  if (handler === undefined) {
    return failed(`no activity named '${name}' is registered on this worker`, "ActivityNotFound");
  }
  let value: Json;
  try {
    value = decode(input);
  } catch (e) {
    return failed(`the step's input is not JSON: ${(e as Error).message}`, "InvalidInput", true);
  }
  let result: unknown;
  try {
    result = await handler(value, step);
  } catch (e) {
    const f = failureOf(e);
    return interrupted() ? { kind: "failure", failure: f, interrupted: true } : { kind: "failure", failure: f };
  }
  if (asPredicate && typeof result === "boolean") {
    return { kind: "predicate", value: result };
  }
  try {
    // Encoded no deeper than the limit, so a result of any depth fails on it (not as "not
    // JSON", which a stack overflow in the encoder would otherwise say).
    const { text, depth } = encode(result, maxDepth);
    return { kind: "context", json: Buffer.from(text, "utf8"), depth };
  } catch (e) {
    if (e instanceof TooDeepError) {
      return tooDeep(e.depth);
    }
    return failed(`activity '${name}' returned a value that is not JSON: ${(e as Error).message}`, "TypeError", true);
  }
}

/**
 * Fails, non-retryably, a result the server would not take: over its payload limit (0: the
 * default) or nested deeper than the depth limit (docs/worker-protocol.md, "Limits").
 * Retrying cannot make it smaller.
 */
export function checkLimits(out: Outcome, maxPayloadBytes: number): Outcome {
  if (out.kind !== "context") {
    return out;
  }
  const limit = maxPayloadBytes > 0 ? maxPayloadBytes : DEFAULT_MAX_PAYLOAD_BYTES;
  if (out.json.length > limit) {
    return failed(
      `step result is ${out.json.length} bytes; the limit is ${limit} bytes (max_payload_bytes)`,
      "PayloadTooLarge",
      true,
    );
  }
  if (out.depth > MAX_DEPTH) {
    return tooDeep(out.depth);
  }
  return out;
}

function tooDeep(depth: number): Outcome {
  return failed(`step result nests ${depth} levels deep; the limit is ${MAX_DEPTH}`, "TooDeep", true);
}
