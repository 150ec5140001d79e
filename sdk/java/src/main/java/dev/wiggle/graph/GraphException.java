package dev.wiggle.graph;

/** Graph bytes that are not a well-formed canonical graph. */
public final class GraphException extends Exception {
  private static final long serialVersionUID = 1L;

  public GraphException(String message) {
    super(message);
  }

  public GraphException(String message, Throwable cause) {
    super(message, cause);
  }
}
