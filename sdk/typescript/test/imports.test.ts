/** The SDK's modules import one way: no module of src/ reaches one that imports it back
 * (type-only imports count: they tie the two modules' shapes together all the same). */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";

const IMPORT = /^\s*(?:import|export)\s[^;]*?from\s+"\.\/([\w-]+)\.js"/gm;

function graphOf(dir: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of readdirSync(dir)) {
    if (!file.endsWith(".ts") || file.endsWith(".d.ts")) continue;
    const text = readFileSync(join(dir, file), "utf8");
    graph.set(file.slice(0, -3), [...text.matchAll(IMPORT)].map((m) => m[1] as string));
  }
  return graph;
}

/** One cycle, as the modules on it, or null. */
function cycleIn(graph: Map<string, string[]>): string[] | null {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (v: string): string[] | null => {
    state.set(v, "open");
    path.push(v);
    for (const w of graph.get(v) ?? []) {
      if (state.get(w) === "open") return [...path.slice(path.indexOf(w)), w];
      if (!state.has(w)) {
        const found = visit(w);
        if (found) return found;
      }
    }
    path.pop();
    state.set(v, "done");
    return null;
  };
  for (const v of [...graph.keys()].sort()) {
    if (!state.has(v)) {
      const found = visit(v);
      if (found) return found;
    }
  }
  return null;
}

describe("imports", () => {
  it("src/ has no import cycle", () => {
    assert.equal(cycleIn(graphOf(resolve("src"))), null);
  });

  it("a cycle is found, a type-only import included", () => {
    const graph = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a"]],
    ]);
    assert.deepEqual(cycleIn(graph), ["a", "b", "c", "a"]);
    const text = 'import type { Core } from "./core.js";\n';
    assert.deepEqual([...text.matchAll(IMPORT)].map((m) => m[1]), ["core"]);
  });
});
