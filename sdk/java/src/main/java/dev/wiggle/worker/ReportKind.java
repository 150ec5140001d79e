package dev.wiggle.worker;

import dev.wiggle.proto.v1.AdvanceRunRequest;
import dev.wiggle.proto.v1.CompleteTaskRequest;
import dev.wiggle.proto.v1.FailTaskRequest;
import dev.wiggle.proto.v1.ReleaseTaskRequest;
import dev.wiggle.proto.v1.ReportError;
import dev.wiggle.proto.v1.TaskReport;
import dev.wiggle.proto.v1.TaskReportAnswer;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;

/**
 * The four report RPCs a {@code ReportBatch} carries: how each goes into a {@code TaskReport},
 * and how its answer comes out as what the report's own RPC would have given its caller.
 */
enum ReportKind {
  COMPLETE(WiggleRpc.COMPLETE_TASK, TaskReportAnswer.AnswerCase.TASK),
  FAIL(WiggleRpc.FAIL_TASK, TaskReportAnswer.AnswerCase.TASK),
  RELEASE(WiggleRpc.RELEASE_TASK, TaskReportAnswer.AnswerCase.TASK),
  ADVANCE(WiggleRpc.ADVANCE_RUN, TaskReportAnswer.AnswerCase.ADVANCE);

  private final MethodDescriptor<?, ?> method;
  private final TaskReportAnswer.AnswerCase answer;

  ReportKind(MethodDescriptor<?, ?> method, TaskReportAnswer.AnswerCase answer) {
    this.method = method;
    this.answer = answer;
  }

  /** The kind of report {@code method} sends; null for every call that is not a report. */
  static ReportKind of(MethodDescriptor<?, ?> method) {
    for (ReportKind k : values()) {
      if (k.method == method) {
        return k;
      }
    }
    return null;
  }

  TaskReport wrap(Object request) {
    TaskReport.Builder r = TaskReport.newBuilder();
    switch (this) {
      case COMPLETE -> r.setComplete((CompleteTaskRequest) request);
      case FAIL -> r.setFail((FailTaskRequest) request);
      case RELEASE -> r.setRelease((ReleaseTaskRequest) request);
      case ADVANCE -> r.setAdvance((AdvanceRunRequest) request);
    }
    return r.build();
  }

  /**
   * The response in {@code a}; a refusal is thrown as the error the report's own RPC would have
   * failed with, {@code wiggle-error-code} trailer included, so {@link RpcException#of} reads it
   * the same way.
   */
  Object unpack(TaskReportAnswer a) {
    if (a.getAnswerCase() == TaskReportAnswer.AnswerCase.ERROR) {
      ReportError e = a.getError();
      Metadata trailers = new Metadata();
      if (!e.getErrorCode().isEmpty()) {
        trailers.put(RpcException.ERROR_CODE, e.getErrorCode());
      }
      throw Status.fromCodeValue(e.getStatusCode()).withDescription(e.getMessage())
          .asRuntimeException(trailers);
    }
    if (a.getAnswerCase() != answer) {
      throw new StatusRuntimeException(Status.INTERNAL.withDescription("ReportBatch answered a "
          + method.getBareMethodName() + " with " + a.getAnswerCase()));
    }
    return answer == TaskReportAnswer.AnswerCase.ADVANCE ? a.getAdvance() : a.getTask();
  }
}
