package dev.wiggle.expressions;

import java.util.Set;

/**
 * An expression that failed when evaluated (docs/expressions.md, "Errors"): a non-retryable
 * failure of its node. {@link #kind()} is one of {@link #KINDS}; {@link #detail()} is the
 * library's own words.
 */
public final class EvaluationException extends RuntimeException {
  /** The eight error kinds of the profile. */
  public static final Set<String> KINDS =
      Set.of(
          "no_such_key",
          "type_mismatch",
          "division_by_zero",
          "overflow",
          "out_of_range",
          "invalid_argument",
          "not_json",
          "not_boolean");

  private final String source;
  private final String kind;
  private final String detail;

  public EvaluationException(String source, String kind, String detail) {
    super("expression '" + source + "' failed (" + kind + "): " + detail);
    if (!KINDS.contains(kind)) {
      throw new IllegalArgumentException("not an error kind of the profile: " + kind);
    }
    this.source = source;
    this.kind = kind;
    this.detail = detail;
  }

  public String source() {
    return source;
  }

  public String kind() {
    return kind;
  }

  public String detail() {
    return detail;
  }
}
