package dev.wiggle.worker;

import com.google.protobuf.Message;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.ServerCalls;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

/**
 * An in-process stand-in for a Wiggle server: each method answers with the function a test set
 * for it (UNIMPLEMENTED otherwise, like a server that predates it), and every request is
 * recorded in order.
 */
final class FakeServer implements AutoCloseable {
  private final Map<String, Function<Message, Message>> answers = new ConcurrentHashMap<>();
  final List<Message> requests = new CopyOnWriteArrayList<>();
  private final Server server;
  final ManagedChannel channel;

  FakeServer() throws IOException {
    String name = InProcessServerBuilder.generateName();
    ServerServiceDefinition.Builder service = ServerServiceDefinition.builder(WiggleRpc.SERVICE);
    for (MethodDescriptor<?, ?> m : WiggleRpc.ALL) {
      add(service, m);
    }
    server = InProcessServerBuilder.forName(name).addService(service.build()).build().start();
    channel = InProcessChannelBuilder.forName(name).directExecutor().build();
  }

  @SuppressWarnings("unchecked")
  private <Q, R> void add(ServerServiceDefinition.Builder service, MethodDescriptor<Q, R> m) {
    service.addMethod(m, ServerCalls.asyncUnaryCall((req, out) -> {
      requests.add((Message) req);
      Function<Message, Message> f = answers.get(m.getBareMethodName());
      if (f == null) {
        out.onError(Status.UNIMPLEMENTED.withDescription(m.getBareMethodName()).asRuntimeException());
        return;
      }
      try {
        out.onNext((R) f.apply((Message) req));
        out.onCompleted();
      } catch (StatusRuntimeException e) {
        out.onError(e);
      }
    }));
  }

  /** Answers {@code method} with {@code f}; null: UNIMPLEMENTED again. */
  @SuppressWarnings("unchecked")
  <Q extends Message, R extends Message> FakeServer on(MethodDescriptor<Q, R> method, Function<Q, R> f) {
    if (f == null) {
      answers.remove(method.getBareMethodName());
    } else {
      answers.put(method.getBareMethodName(), req -> f.apply((Q) req));
    }
    return this;
  }

  /** The requests of one type, in order. */
  <T extends Message> List<T> sent(Class<T> type) {
    List<T> out = new ArrayList<>();
    for (Message m : requests) {
      if (type.isInstance(m)) {
        out.add(type.cast(m));
      }
    }
    return out;
  }

  @Override
  public void close() {
    channel.shutdownNow();
    server.shutdownNow();
  }
}
