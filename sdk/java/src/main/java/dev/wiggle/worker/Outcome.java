package dev.wiggle.worker;

import dev.wiggle.proto.v1.StepFailure;
import dev.wiggle.proto.v1.StepResult;
import com.google.protobuf.ByteString;

/**
 * What one step produced: exactly one of a context (JSON bytes), a predicate's value, a failure.
 */
record Outcome(byte[] context, Boolean predicate, Failure failure) {

  /** A failed step, as the wire's StepFailure. */
  record Failure(String message, boolean nonRetryable, String errorType) {
    StepFailure proto() {
      return StepFailure.newBuilder()
          .setMessage(message)
          .setNonRetryable(nonRetryable)
          .setErrorType(errorType)
          .build();
    }
  }

  static Outcome ofContext(byte[] json) {
    return new Outcome(json, null, null);
  }

  static Outcome ofPredicate(boolean value) {
    return new Outcome(null, value, null);
  }

  static Outcome failed(String message, boolean nonRetryable, String errorType) {
    return new Outcome(null, null, new Failure(message, nonRetryable, errorType));
  }

  StepResult toStep(String nodeId) {
    StepResult.Builder r = StepResult.newBuilder().setNodeId(nodeId);
    if (failure != null) {
      r.setFailure(failure.proto());
    } else if (predicate != null) {
      r.setPredicate(predicate);
    } else {
      r.setContext(ByteString.copyFrom(context));
    }
    return r.build();
  }

  static Outcome of(StepResult r) {
    return switch (r.getOutcomeCase()) {
      case FAILURE -> failed(
          r.getFailure().getMessage(), r.getFailure().getNonRetryable(), r.getFailure().getErrorType());
      case PREDICATE -> ofPredicate(r.getPredicate());
      default -> ofContext(r.getContext().toByteArray());
    };
  }

  /** The result as SERVER mode's CompleteTask carries it: a predicate is JSON true / false. */
  byte[] serverResult() {
    if (predicate != null) {
      return (predicate ? "true" : "false").getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    }
    return context;
  }
}
