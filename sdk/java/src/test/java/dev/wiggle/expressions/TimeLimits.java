package dev.wiggle.expressions;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.function.Executable;

/**
 * The time limit of the tests whose evaluations must end within it. The limit is wall-clock
 * time, which a loaded machine stretches many times over: a vector of 10,000 iterations that
 * takes a tenth of a second on an idle machine has taken more than the second on a busy one. So
 * these run under a limit of a minute; an evaluation that is not linear takes minutes on the
 * vectors that check it, and still fails.
 */
final class TimeLimits {
  static final long ROOMY_NANOS = TimeUnit.MINUTES.toNanos(1);
  /**
   * The limit the cases that must reach a limit run under: a tenth of the profile's second. What
   * they check is that an evaluation of ten seconds or more is stopped with the limit's error,
   * which a tenth of a second shows as well as a second does, in a tenth of the CPU; that the
   * profile's limit is a second is checked on its own (ExpressionVectorsTest).
   */
  static final long BRIEF_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

  private TimeLimits() {}

  /** Runs body with evaluations under a limit of a minute instead of the profile's second. */
  static void roomy(Executable body) throws Throwable {
    under(ROOMY_NANOS, body);
  }

  /** Runs body with evaluations under a limit of a tenth of a second (BRIEF_NANOS). */
  static void brief(Executable body) throws Throwable {
    under(BRIEF_NANOS, body);
  }

  private static void under(long nanos, Executable body) throws Throwable {
    long was = Sizes.timeLimitNanos;
    Sizes.timeLimitNanos = nanos;
    try {
      body.execute();
    } finally {
      Sizes.timeLimitNanos = was;
    }
  }
}
