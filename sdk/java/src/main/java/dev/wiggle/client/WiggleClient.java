package dev.wiggle.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.ByteString;
import dev.wiggle.proto.v1.CancelInstanceRequest;
import dev.wiggle.proto.v1.DescribeInstanceRequest;
import dev.wiggle.proto.v1.Instance;
import dev.wiggle.proto.v1.InstanceStatus;
import dev.wiggle.proto.v1.SignalInstanceRequest;
import dev.wiggle.proto.v1.StartInstanceRequest;
import dev.wiggle.proto.v1.StartInstanceResponse;
import dev.wiggle.proto.v1.WaitInstanceRequest;
import dev.wiggle.worker.Connection;
import dev.wiggle.worker.EagerSlot;
import dev.wiggle.worker.Json;
import dev.wiggle.worker.WiggleRpc;
import dev.wiggle.worker.Worker;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.stub.ClientCalls;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * Starts, signals, cancels and waits on instances. Errors are {@link
 * io.grpc.StatusRuntimeException}s carrying the server's status and {@code wiggle-error-code}.
 *
 * <pre>{@code
 * try (WiggleClient client = new WiggleClient(Connection.to("127.0.0.1:7233"))) {
 *   Started s = client.startEager("order-fulfilment", order, worker); // first task to `worker`
 *   Instance done = client.await(s.instanceId(), Duration.ofMinutes(1));
 * }
 * }</pre>
 */
public final class WiggleClient implements AutoCloseable {
  private final ManagedChannel owned;
  private final Channel channel;
  private final long timeoutMs;

  /** A client on a channel it opens (and closes). */
  public WiggleClient(Connection connection) {
    this.owned = connection.open();
    this.channel = connection.withToken(owned);
    this.timeoutMs = 30_000;
  }

  /** A client on a channel the caller owns. */
  public WiggleClient(Channel channel) {
    this.owned = null;
    this.channel = channel;
    this.timeoutMs = 30_000;
  }

  /** A started instance. {@code eager}: its first task went straight to the given worker. */
  public record Started(String instanceId, String version, boolean created, boolean eager) {}

  /** Starts the newest version of {@code flow} with {@code input} (null: JSON null). */
  public Started start(String flow, JsonNode input) {
    return start(flow, input, "");
  }

  /** Starts with a caller-chosen instance id; starting it twice returns the first. */
  public Started start(String flow, JsonNode input, String instanceId) {
    StartInstanceResponse r = call(WiggleRpc.START_INSTANCE, request(flow, input, instanceId).build(), timeoutMs);
    return new Started(r.getInstanceId(), r.getVersion(), r.getCreated(), false);
  }

  /**
   * Starts an instance and hands its first task straight to {@code worker} (in this process),
   * saving a poll round trip: the server leases the task in the start's own transaction. Without
   * a free slot on the worker this is a plain start and the task is polled as usual.
   */
  public Started startEager(String flow, JsonNode input, Worker worker) {
    return startEager(flow, input, "", worker);
  }

  public Started startEager(String flow, JsonNode input, String instanceId, Worker worker) {
    EagerSlot slot = worker.reserveEagerSlot();
    if (slot == null) {
      return start(flow, input, instanceId);
    }
    try (slot) {
      StartInstanceRequest req = request(flow, input, instanceId).setEager(worker.eagerDispatch()).build();
      StartInstanceResponse r = call(WiggleRpc.START_INSTANCE, req, timeoutMs);
      boolean eager = r.hasEagerTask() && slot.dispatch(r.getEagerTask());
      return new Started(r.getInstanceId(), r.getVersion(), r.getCreated(), eager);
    }
  }

  /** Delivers a signal; false when it was buffered until an await for it is reached. */
  public boolean signal(String instanceId, String name, JsonNode payload) {
    return call(WiggleRpc.SIGNAL_INSTANCE, SignalInstanceRequest.newBuilder()
        .setInstanceId(instanceId).setName(name)
        .setPayload(ByteString.copyFrom(Json.write(payload))).build(), timeoutMs).getDelivered();
  }

  public InstanceStatus cancel(String instanceId, String reason) {
    return call(WiggleRpc.CANCEL_INSTANCE, CancelInstanceRequest.newBuilder()
        .setInstanceId(instanceId).setReason(reason == null ? "" : reason).build(), timeoutMs).getStatus();
  }

  public Instance describe(String instanceId) {
    return call(WiggleRpc.DESCRIBE_INSTANCE,
        DescribeInstanceRequest.newBuilder().setInstanceId(instanceId).build(), timeoutMs);
  }

  /**
   * The instance once it is no longer RUNNING, or as it is when {@code atMost} has passed (look
   * at its status). Long polls the server in rounds of at most 30 s.
   */
  public Instance await(String instanceId, Duration atMost) {
    long end = System.nanoTime() + atMost.toNanos();
    while (true) {
      long leftMs = TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime());
      int waitMs = (int) Math.max(0, Math.min(30_000, leftMs));
      Instance i = call(WiggleRpc.WAIT_INSTANCE, WaitInstanceRequest.newBuilder()
          .setInstanceId(instanceId).setWaitMs(waitMs).build(), waitMs + timeoutMs);
      if (i.getStatus() != InstanceStatus.RUNNING || leftMs <= 0) {
        return i;
      }
    }
  }

  /** The context of a finished instance as JSON. */
  public static JsonNode context(Instance instance) {
    try {
      return Json.parse(instance.getContext().toByteArray());
    } catch (java.io.IOException e) {
      throw new IllegalStateException("the server sent a context that is not JSON", e);
    }
  }

  private static StartInstanceRequest.Builder request(String flow, JsonNode input, String instanceId) {
    return StartInstanceRequest.newBuilder().setFlow(flow)
        .setInput(ByteString.copyFrom(Json.write(input)))
        .setInstanceId(instanceId == null ? "" : instanceId);
  }

  private <Q, R> R call(MethodDescriptor<Q, R> method, Q request, long deadlineMs) {
    return ClientCalls.blockingUnaryCall(channel, method,
        CallOptions.DEFAULT.withDeadlineAfter(deadlineMs, TimeUnit.MILLISECONDS), request);
  }

  @Override
  public void close() {
    if (owned != null) {
      owned.shutdown();
      try {
        owned.awaitTermination(2, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
