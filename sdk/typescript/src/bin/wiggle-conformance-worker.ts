#!/usr/bin/env node
// `wiggle-conformance-worker`: see src/conformance/main.ts.
import { main } from "../conformance/main.js";

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`wiggle-conformance-worker: ${String(e)}\n`);
    process.exit(1);
  },
);
