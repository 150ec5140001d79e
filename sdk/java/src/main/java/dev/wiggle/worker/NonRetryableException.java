package dev.wiggle.worker;

/**
 * Thrown by a handler to fail its step for good: no retry, the instance fails now with this
 * message. Any other exception fails the attempt and leaves the step's retry policy in charge.
 */
public class NonRetryableException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public NonRetryableException(String message) {
    super(message);
  }

  public NonRetryableException(String message, Throwable cause) {
    super(message, cause);
  }
}
