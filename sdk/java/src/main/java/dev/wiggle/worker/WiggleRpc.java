package dev.wiggle.worker;

import com.google.protobuf.Message;
import dev.wiggle.proto.v1.AdvanceRunRequest;
import dev.wiggle.proto.v1.AdvanceRunResponse;
import dev.wiggle.proto.v1.CancelInstanceRequest;
import dev.wiggle.proto.v1.CancelInstanceResponse;
import dev.wiggle.proto.v1.CompleteTaskRequest;
import dev.wiggle.proto.v1.Definition;
import dev.wiggle.proto.v1.DescribeInstanceRequest;
import dev.wiggle.proto.v1.EndPollsRequest;
import dev.wiggle.proto.v1.EndPollsResponse;
import dev.wiggle.proto.v1.FailTaskRequest;
import dev.wiggle.proto.v1.GetDefinitionRequest;
import dev.wiggle.proto.v1.HeartbeatRequest;
import dev.wiggle.proto.v1.HeartbeatResponse;
import dev.wiggle.proto.v1.Instance;
import dev.wiggle.proto.v1.ListDefinitionsRequest;
import dev.wiggle.proto.v1.ListDefinitionsResponse;
import dev.wiggle.proto.v1.ListIncidentsRequest;
import dev.wiggle.proto.v1.ListIncidentsResponse;
import dev.wiggle.proto.v1.ListInstancesRequest;
import dev.wiggle.proto.v1.ListInstancesResponse;
import dev.wiggle.proto.v1.ListWorkersRequest;
import dev.wiggle.proto.v1.ListWorkersResponse;
import dev.wiggle.proto.v1.PollTasksRequest;
import dev.wiggle.proto.v1.PollTasksResponse;
import dev.wiggle.proto.v1.RegisterDefinitionRequest;
import dev.wiggle.proto.v1.RegisterDefinitionResponse;
import dev.wiggle.proto.v1.ReleaseTaskRequest;
import dev.wiggle.proto.v1.ReportBatchRequest;
import dev.wiggle.proto.v1.ReportBatchResponse;
import dev.wiggle.proto.v1.SignalInstanceRequest;
import dev.wiggle.proto.v1.SignalInstanceResponse;
import dev.wiggle.proto.v1.StartInstanceRequest;
import dev.wiggle.proto.v1.StartInstanceResponse;
import dev.wiggle.proto.v1.TaskReportResponse;
import dev.wiggle.proto.v1.WaitInstanceRequest;
import io.grpc.MethodDescriptor;
import io.grpc.protobuf.ProtoUtils;
import java.util.List;

/**
 * The gRPC methods of the {@code wiggle.v1.Wiggle} service, written out rather than generated:
 * every one is a unary call of a generated request message to a generated response message, so
 * the descriptors are these few lines (the stub generator is a native binary the build would
 * otherwise need). {@code WiggleRpcTest} checks them against the service in the .proto: same
 * names, same request and response types, none missing.
 */
public final class WiggleRpc {
  /** The service's full name. */
  public static final String SERVICE = "wiggle.v1.Wiggle";

  public static final MethodDescriptor<RegisterDefinitionRequest, RegisterDefinitionResponse>
      REGISTER_DEFINITION = unary("RegisterDefinition", RegisterDefinitionRequest.getDefaultInstance(),
          RegisterDefinitionResponse.getDefaultInstance());
  public static final MethodDescriptor<GetDefinitionRequest, Definition> GET_DEFINITION =
      unary("GetDefinition", GetDefinitionRequest.getDefaultInstance(), Definition.getDefaultInstance());
  public static final MethodDescriptor<ListDefinitionsRequest, ListDefinitionsResponse>
      LIST_DEFINITIONS = unary("ListDefinitions", ListDefinitionsRequest.getDefaultInstance(),
          ListDefinitionsResponse.getDefaultInstance());
  public static final MethodDescriptor<StartInstanceRequest, StartInstanceResponse> START_INSTANCE =
      unary("StartInstance", StartInstanceRequest.getDefaultInstance(),
          StartInstanceResponse.getDefaultInstance());
  public static final MethodDescriptor<SignalInstanceRequest, SignalInstanceResponse>
      SIGNAL_INSTANCE = unary("SignalInstance", SignalInstanceRequest.getDefaultInstance(),
          SignalInstanceResponse.getDefaultInstance());
  public static final MethodDescriptor<CancelInstanceRequest, CancelInstanceResponse>
      CANCEL_INSTANCE = unary("CancelInstance", CancelInstanceRequest.getDefaultInstance(),
          CancelInstanceResponse.getDefaultInstance());
  public static final MethodDescriptor<DescribeInstanceRequest, Instance> DESCRIBE_INSTANCE =
      unary("DescribeInstance", DescribeInstanceRequest.getDefaultInstance(), Instance.getDefaultInstance());
  public static final MethodDescriptor<ListInstancesRequest, ListInstancesResponse> LIST_INSTANCES =
      unary("ListInstances", ListInstancesRequest.getDefaultInstance(),
          ListInstancesResponse.getDefaultInstance());
  public static final MethodDescriptor<ListIncidentsRequest, ListIncidentsResponse> LIST_INCIDENTS =
      unary("ListIncidents", ListIncidentsRequest.getDefaultInstance(),
          ListIncidentsResponse.getDefaultInstance());
  public static final MethodDescriptor<WaitInstanceRequest, Instance> WAIT_INSTANCE =
      unary("WaitInstance", WaitInstanceRequest.getDefaultInstance(), Instance.getDefaultInstance());
  public static final MethodDescriptor<PollTasksRequest, PollTasksResponse> POLL_TASKS =
      unary("PollTasks", PollTasksRequest.getDefaultInstance(), PollTasksResponse.getDefaultInstance());
  public static final MethodDescriptor<EndPollsRequest, EndPollsResponse> END_POLLS =
      unary("EndPolls", EndPollsRequest.getDefaultInstance(), EndPollsResponse.getDefaultInstance());
  public static final MethodDescriptor<ListWorkersRequest, ListWorkersResponse> LIST_WORKERS =
      unary("ListWorkers", ListWorkersRequest.getDefaultInstance(), ListWorkersResponse.getDefaultInstance());
  public static final MethodDescriptor<CompleteTaskRequest, TaskReportResponse> COMPLETE_TASK =
      unary("CompleteTask", CompleteTaskRequest.getDefaultInstance(), TaskReportResponse.getDefaultInstance());
  public static final MethodDescriptor<FailTaskRequest, TaskReportResponse> FAIL_TASK =
      unary("FailTask", FailTaskRequest.getDefaultInstance(), TaskReportResponse.getDefaultInstance());
  public static final MethodDescriptor<ReleaseTaskRequest, TaskReportResponse> RELEASE_TASK =
      unary("ReleaseTask", ReleaseTaskRequest.getDefaultInstance(), TaskReportResponse.getDefaultInstance());
  public static final MethodDescriptor<HeartbeatRequest, HeartbeatResponse> HEARTBEAT =
      unary("Heartbeat", HeartbeatRequest.getDefaultInstance(), HeartbeatResponse.getDefaultInstance());
  public static final MethodDescriptor<AdvanceRunRequest, AdvanceRunResponse> ADVANCE_RUN =
      unary("AdvanceRun", AdvanceRunRequest.getDefaultInstance(), AdvanceRunResponse.getDefaultInstance());
  public static final MethodDescriptor<ReportBatchRequest, ReportBatchResponse> REPORT_BATCH =
      unary("ReportBatch", ReportBatchRequest.getDefaultInstance(), ReportBatchResponse.getDefaultInstance());

  /** Every method above. */
  public static final List<MethodDescriptor<?, ?>> ALL =
      List.of(REGISTER_DEFINITION, GET_DEFINITION, LIST_DEFINITIONS, START_INSTANCE,
          SIGNAL_INSTANCE, CANCEL_INSTANCE, DESCRIBE_INSTANCE, LIST_INSTANCES, LIST_INCIDENTS,
          WAIT_INSTANCE,
          POLL_TASKS, END_POLLS, LIST_WORKERS, COMPLETE_TASK, FAIL_TASK, RELEASE_TASK, HEARTBEAT,
          ADVANCE_RUN, REPORT_BATCH);

  private WiggleRpc() {}

  private static <Q extends Message, R extends Message> MethodDescriptor<Q, R> unary(
      String name, Q request, R response) {
    return MethodDescriptor.<Q, R>newBuilder()
        .setType(MethodDescriptor.MethodType.UNARY)
        .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, name))
        .setRequestMarshaller(ProtoUtils.marshaller(request))
        .setResponseMarshaller(ProtoUtils.marshaller(response))
        .setSampledToLocalTracing(true)
        .build();
  }
}
