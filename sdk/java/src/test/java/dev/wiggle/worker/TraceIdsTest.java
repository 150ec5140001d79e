package dev.wiggle.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.util.HashMap;
import dev.wiggle.Repo;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The derived trace and span ids against the shared vectors of spec/tracing/ids.json. */
class TraceIdsTest {
  private static JsonNode vectors() throws Exception {
    return new ObjectMapper().readTree(
        Files.readAllBytes(Repo.root().resolve("spec/tracing/ids.json")));
  }

  @Test
  void derivesTheIdsOfTheSharedVectors() throws Exception {
    JsonNode v = vectors();
    for (JsonNode c : v.get("trace_ids")) {
      assertEquals(c.get("trace_id").asText(), TraceIds.traceIdFor(c.get("root_instance_id").asText()));
    }
    for (JsonNode c : v.get("instance_span_ids")) {
      assertEquals(c.get("span_id").asText(), TraceIds.instanceSpanId(c.get("instance_id").asText()));
    }
    for (JsonNode c : v.get("step_span_ids")) {
      Map<String, Integer> loops = new HashMap<>();
      c.get("loop_counts").fields().forEachRemaining(e -> loops.put(e.getKey(), e.getValue().asInt()));
      assertEquals(c.get("loops").asText(), TraceIds.loopsKey(loops));
      assertEquals(c.get("span_id").asText(), TraceIds.stepSpanId(c.get("instance_id").asText(),
          c.get("task_id").asText(), c.get("node_id").asText(), c.get("attempt").asInt(), loops));
    }
  }

  @Test
  void parsesTraceparentsAsTheVectorsSay() throws Exception {
    JsonNode v = vectors();
    assertTrue(v.get("traceparents").size() > 0);
    for (JsonNode c : v.get("traceparents")) {
      TraceIds.Parent p = TraceIds.parse(c.get("traceparent").asText());
      if (!c.get("valid").asBoolean()) {
        assertNull(p, c.get("traceparent").asText());
        continue;
      }
      assertNotNull(p, c.get("traceparent").asText());
      assertEquals(c.get("trace_id").asText(), p.traceId());
      assertEquals(c.get("span_id").asText(), p.spanId());
      assertEquals(c.get("flags").asInt(), p.flags());
    }
  }

  @Test
  void tracingIsOnOnlyByTheOtelVariables() {
    assertFalse(TraceIds.tracingEnabled(Map.of()));
    assertTrue(TraceIds.tracingEnabled(Map.of("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x")));
    assertFalse(TraceIds.tracingEnabled(
        Map.of("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_SDK_DISABLED", "true")));
    assertFalse(TraceIds.tracingEnabled(
        Map.of("OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_TRACES_EXPORTER", "none")));
  }
}
