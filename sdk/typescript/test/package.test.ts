/** The built package loads as CommonJS and as an ES module, through its `exports` map. */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { it } from "node:test";

const PKG = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

function exportsOf(script: string, type: "commonjs" | "module"): string[] {
  const out = execFileSync(process.execPath, [type === "module" ? "--input-type=module" : "--input-type=commonjs", "-e", script], {
    cwd: PKG,
    encoding: "utf8",
  });
  return JSON.parse(out) as string[];
}

it("require() and import give the same API, conformance subpath included, and no more", () => {
  const cjs = exportsOf(
    `const w = require("@wiggle-engine/worker"); const c = require("@wiggle-engine/worker/conformance");
     console.log(JSON.stringify([...Object.keys(w), ...Object.keys(c).map(k => "conformance." + k)].sort()))`,
    "commonjs",
  );
  const esm = exportsOf(
    `const w = await import("@wiggle-engine/worker"); const c = await import("@wiggle-engine/worker/conformance");
     console.log(JSON.stringify([...Object.keys(w), ...Object.keys(c).map(k => "conformance." + k)].sort()))`,
    "module",
  );
  assert.deepEqual(cjs, esm);
  // The public surface, on purpose: a change here is a change of the SDK's API.
  assert.deepEqual(esm, [
    "CHANNEL_OPTIONS",
    "DEFAULT_ADDRESS",
    "ERROR_KINDS",
    "EvaluationError",
    "ExpressionInvalid",
    "JsonFloat",
    "JsonSyntaxError",
    "LeaseLostError",
    "MAX_DEPTH",
    "NonRetryableError",
    "NotJsonError",
    "RpcError",
    "SDK",
    "TooDeepError",
    "Worker",
    "WorkerStoppingError",
    "compileExpression",
    "conformance.TRACE_ENV",
    "conformance.activities",
    "conformance.main",
    "conformance.predicates",
    "conformance.traced",
    "connectionFromEnv",
    "decode",
    "encode",
    "stderrLogger",
    "stringify",
  ]);
});
