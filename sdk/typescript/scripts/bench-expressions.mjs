// Not a test (it asserts only that the result is right): µs per evaluation of the benchmark
// expression of scripts/bench_expressions.py, compiled once. Run after `npm run build`:
//   node scripts/bench-expressions.mjs [evaluations]
import { compileExpression } from "../dist/esm/index.js";

const expression = compileExpression('ctx.amount_cents >= 1000000 && ctx.country != "NL"');
const ctx = { amount_cents: 1250000, country: "DE" };
const n = Number(process.argv[2] ?? 200000);
for (let round = 0; round < 5; round++) {
  const begun = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    if (expression.condition(ctx) !== true) throw new Error("the benchmark expression is not true");
  }
  const us = Number(process.hrtime.bigint() - begun) / 1000 / n;
  console.log(`round ${round}: ${us.toFixed(2)} µs per evaluation (${n} evaluations)`);
}
