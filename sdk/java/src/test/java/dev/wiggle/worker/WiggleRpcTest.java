package dev.wiggle.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.google.protobuf.Descriptors.MethodDescriptor;
import com.google.protobuf.Descriptors.ServiceDescriptor;
import dev.wiggle.proto.v1.WiggleProto;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/** The written-out method descriptors match the service in the .proto, one for one. */
class WiggleRpcTest {
  @Test
  void everyMethodOfTheServiceIsDescribedWithItsTypes() {
    ServiceDescriptor service = WiggleProto.getDescriptor().findServiceByName("Wiggle");
    assertEquals(WiggleRpc.SERVICE, service.getFullName());
    Map<String, String> proto = new TreeMap<>();
    for (MethodDescriptor m : service.getMethods()) {
      proto.put(m.getName(), m.getInputType().getFullName() + " -> " + m.getOutputType().getFullName());
    }
    Map<String, String> java = new TreeMap<>();
    for (io.grpc.MethodDescriptor<?, ?> m : WiggleRpc.ALL) {
      assertEquals(io.grpc.MethodDescriptor.MethodType.UNARY, m.getType());
      java.put(m.getBareMethodName(), typeName(m.getRequestMarshaller()) + " -> "
          + typeName(m.getResponseMarshaller()));
    }
    assertEquals(proto, java);
  }

  private static String typeName(io.grpc.MethodDescriptor.Marshaller<?> m) {
    @SuppressWarnings("unchecked")
    io.grpc.MethodDescriptor.PrototypeMarshaller<com.google.protobuf.Message> p =
        (io.grpc.MethodDescriptor.PrototypeMarshaller<com.google.protobuf.Message>) m;
    return p.getMessagePrototype().getDescriptorForType().getFullName();
  }

}
