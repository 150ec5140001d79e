package dev.wiggle.expressions;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;

/**
 * The profile's run-time limits (docs/expressions.md, "Limits") end an evaluation where they are
 * reached, even inside an expression that would set a CEL error aside.
 */
class LimitsTest {
  private static List<Long> range(int n) {
    return LongStream.range(0, n).boxed().toList();
  }

  /** 10,000 strings of 200 characters, each made anew: String.equals compares a string with
   * itself at once. */
  private static List<String> strings() {
    List<String> l = new ArrayList<>();
    for (int i = 0; i < 10_000; i++) {
      l.add("x".repeat(200));
    }
    return l;
  }

  // Without the limit this evaluation compares 9,000 pairs of long lists: about 10 seconds. The
  // evaluator reads the clock only while the evaluation runs, so the limit's detail shows that
  // the clock stopped it there, before its end. How soon after the limit it stopped is a speed,
  // for benchmarks: the limit is wall-clock time, which a loaded machine stretches. The bound of
  // 30 seconds, far past the limit and its 16 nodes of lateness on any machine, only catches an
  // evaluation that ran on long after the clock said stop; that it ran for the limit at least,
  // no machine can change.
  @Test
  void theTimeLimitStopsAnEvaluationThatCouldSetAnErrorAside() {
    Expression e = Expression.compile("ctx.l.all(x, ctx.s == ctx.t) || true");
    Map<String, Object> ctx = Map.of("s", strings(), "t", strings(), "l", range(9000));
    long start = System.nanoTime();
    EvaluationException err = assertThrows(EvaluationException.class, () -> e.evaluate(ctx, null));
    long took = System.nanoTime() - start;
    assertEquals("invalid_argument", err.kind());
    assertEquals("the evaluation ran longer than 1 second", err.detail());
    assertTrue(took >= Sizes.TIME_LIMIT_NANOS && took < 30 * Sizes.TIME_LIMIT_NANOS, took + " ns");
  }

  // The first concatenation past the budget ends the loop; were the loop to run on, `|| true`
  // would set its errors aside and it would end without one (or, past the time limit, with the
  // limit's detail). Three steps, not about the time limit (TimeLimits).
  @Test
  void aSpentSizeBudgetEndsTheLoopThatSpentIt() throws Throwable {
    Expression e = Expression.compile("ctx.l.all(x, ctx.a < ctx.b + 'x') || true");
    Map<String, Object> ctx =
        Map.of("a", "a".repeat(2_000_000), "b", "a".repeat(2_000_000), "l", range(9000));
    TimeLimits.roomy(() -> {
      EvaluationException err =
          assertThrows(EvaluationException.class, () -> e.evaluate(ctx, null));
      assertEquals("invalid_argument", err.kind());
      assertEquals(Sizes.OVER, err.detail());
    });
  }

  // Every comprehension counts each element it visits, and the 10,001st of an evaluation stops
  // it, which neither || nor && can set aside.
  @Test
  void theIterationBudgetIsExact() throws Throwable {
    TimeLimits.roomy(LimitsTest::iterationBudgetIsExact); // 10,000 steps: not about the time limit
  }

  private static void iterationBudgetIsExact() {
    for (String source :
        List.of(
            "ctx.l.all(x, x >= 0)",
            "ctx.l.exists(x, x < 0)",
            "ctx.l.exists_one(x, x < 0) || true",
            "ctx.l.map(x, x).size() > 0",
            "ctx.l.filter(x, x >= 0).size() > 0",
            "ctx.l.map(x, x >= 0, x).size() > 0",
            "ctx.l.all(x, x >= 0) || true",
            "ctx.l.all(x, x >= 0) && false")) {
      Expression e = Expression.compile(source);
      assertDoesNotThrow(
          () -> e.condition(Map.of("l", range(Expression.ITERATION_BUDGET)), null), source);
      EvaluationException err =
          assertThrows(
              EvaluationException.class,
              () -> e.evaluate(Map.of("l", range(Expression.ITERATION_BUDGET + 1)), null),
              source);
      assertEquals("invalid_argument", err.kind(), source);
      assertEquals(
          "more than 10000 comprehension iterations in one evaluation", err.detail(), source);
    }
  }
}
