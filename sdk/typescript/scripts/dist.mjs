// Finishes `npm run build`: marks dist/esm as ES modules and dist/cjs as CommonJS (the package
// itself is "type": "module"), and makes the bin executable.
import { chmodSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const dist = join(resolve(dirname(fileURLToPath(import.meta.url)), ".."), "dist");
writeFileSync(join(dist, "esm/package.json"), `${JSON.stringify({ type: "module" })}\n`);
writeFileSync(join(dist, "cjs/package.json"), `${JSON.stringify({ type: "commonjs" })}\n`);
chmodSync(join(dist, "esm/bin/wiggle-conformance-worker.js"), 0o755);
