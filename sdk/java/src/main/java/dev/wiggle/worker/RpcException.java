package dev.wiggle.worker;

import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;

/**
 * A call that failed for good, or whose retries ran out. {@link #code()} is the gRPC status;
 * {@link #errorCode()} the server's {@code wiggle-error-code} (empty when the call never reached
 * a Wiggle server).
 */
public final class RpcException extends Exception {
  private static final long serialVersionUID = 1L;
  static final Metadata.Key<String> ERROR_CODE =
      Metadata.Key.of("wiggle-error-code", Metadata.ASCII_STRING_MARSHALLER);

  private final transient Status.Code code;
  private final String errorCode;

  RpcException(String method, Status.Code code, String errorCode, String detail, Throwable cause) {
    super(method + ": " + code + (errorCode.isEmpty() ? "" : " " + errorCode) + ": " + detail, cause);
    this.code = code;
    this.errorCode = errorCode;
  }

  static RpcException of(String method, StatusRuntimeException e) {
    Metadata trailers = e.getTrailers();
    String ec = trailers == null ? null : trailers.get(ERROR_CODE);
    String detail = e.getStatus().getDescription();
    return new RpcException(method, e.getStatus().getCode(), ec == null ? "" : ec,
        detail == null ? "" : detail, e);
  }

  public Status.Code code() {
    return code;
  }

  public String errorCode() {
    return errorCode;
  }

  /**
   * Back off and try again: the server is unreachable or overloaded, no answer came in time (a
   * report's fate is then unknown), or a server bug (INTERNAL, UNKNOWN; a resent report is
   * applied at most once).
   */
  boolean retryable() {
    return switch (code) {
      case UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, UNKNOWN -> true;
      default -> false;
    };
  }

  /**
   * The lease is lost: the task is not this worker's to report any more (STALE_LEASE,
   * INSTANCE_NOT_RUNNING, REPORT_OUT_OF_ORDER, no such task).
   */
  boolean gone() {
    return code == Status.Code.FAILED_PRECONDITION || code == Status.Code.NOT_FOUND
        || code == Status.Code.ABORTED;
  }
}
