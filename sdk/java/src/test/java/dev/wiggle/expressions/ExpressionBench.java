package dev.wiggle.expressions;

import java.util.Map;

/**
 * Not a test (it asserts nothing): µs per evaluation of the profile's benchmark expression, the
 * one docs/expressions.md measures the server's library with (scripts/bench_expressions.py runs
 * it, with the other languages'). Run it from sdk/java after
 * {@code mvn package}:
 * {@code java -cp target/classes:target/test-classes:$(cat target/cp.txt) dev.wiggle.expressions.ExpressionBench}
 * with target/cp.txt from {@code mvn dependency:build-classpath -Dmdep.outputFile=target/cp.txt}.
 */
public final class ExpressionBench {
  private ExpressionBench() {}

  public static void main(String[] args) {
    Expression e = Expression.compile("ctx.amount_cents >= 1000000 && ctx.country != \"NL\"");
    // The context of scripts/bench_expressions.py and the other SDKs' benchmarks.
    Map<String, Object> ctx = Map.of("amount_cents", 1250000, "country", "DE");
    Map<String, Object> instance = Map.of("id", "i-1", "flow", "f");
    int n = args.length > 0 ? Integer.parseInt(args[0]) : 200_000;
    for (int round = 0; round < 5; round++) {
      long t0 = System.nanoTime();
      Object r = null;
      for (int i = 0; i < n; i++) {
        r = e.evaluate(ctx, instance);
      }
      double us = (System.nanoTime() - t0) / 1000.0 / n;
      System.out.printf("round %d: %.2f µs per evaluation (%d evaluations, result %s)%n", round, us, n, r);
    }
  }
}
