package dev.wiggle.expressions;

/** An expression CEL's parser or type checker refuses, with its first problem as the message. */
public final class InvalidExpressionException extends IllegalArgumentException {
  private final String source;

  public InvalidExpressionException(String source, String problem) {
    super("expression '" + source + "' is invalid: " + problem);
    this.source = source;
  }

  public String source() {
    return source;
  }
}
