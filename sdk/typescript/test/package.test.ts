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

it("require() and import give the same API, conformance subpath included", () => {
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
  for (const name of ["Worker", "NonRetryableError", "JsonFloat", "connectionFromEnv", "conformance.main"]) {
    assert.ok(esm.includes(name), name);
  }
});
