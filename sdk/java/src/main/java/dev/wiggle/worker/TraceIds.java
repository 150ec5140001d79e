package dev.wiggle.worker;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * W3C trace context and Wiggle's derived span identities (docs/observability.md, "Identities"):
 * the same functions as the server's and every other SDK's, held to spec/tracing/ids.json. Pure:
 * no OpenTelemetry class.
 */
public final class TraceIds {
  private TraceIds() {}

  /** A parsed traceparent: 32 and 16 lowercase hex digits and the flags byte. */
  public record Parent(String traceId, String spanId, int flags) {}

  private static final Pattern TRACEPARENT =
      Pattern.compile("^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$");

  /** A W3C traceparent, or null when it is malformed, oversized or all-zero. */
  public static Parent parse(String value) {
    if (value == null || value.isEmpty() || value.length() > 512) {
      return null;
    }
    Matcher m = TRACEPARENT.matcher(value.strip());
    if (!m.matches()) {
      return null;
    }
    String version = m.group(1);
    if (version.equals("ff") || (version.equals("00") && m.group(5) != null)) {
      return null;
    }
    if (m.group(2).chars().allMatch(c -> c == '0') || m.group(3).chars().allMatch(c -> c == '0')) {
      return null;
    }
    return new Parent(m.group(2), m.group(3), Integer.parseInt(m.group(4), 16));
  }

  private static String digest(String text, int size) {
    byte[] sum;
    try {
      sum = MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e); // every JVM has SHA-256
    }
    boolean zero = true;
    for (int i = 0; i < size; i++) {
      zero &= sum[i] == 0;
    }
    if (zero) {
      sum[size - 1] = 1;
    }
    StringBuilder out = new StringBuilder(size * 2);
    for (int i = 0; i < size; i++) {
      out.append(String.format("%02x", sum[i] & 0xff));
    }
    return out.toString();
  }

  /** The trace of an instance tree whose start carried no traceparent. */
  public static String traceIdFor(String rootInstanceId) {
    return digest("wiggle.trace\n" + rootInstanceId, 16);
  }

  /** The instance's span: the parent of its steps and of the server's spans. */
  public static String instanceSpanId(String instanceId) {
    return digest("wiggle.instance\n" + instanceId, 8);
  }

  /** {@code id=count} of every loop the token is inside, sorted by id, joined by commas. */
  public static String loopsKey(Map<String, Integer> loopCounts) {
    return new TreeMap<>(loopCounts).entrySet().stream()
        .map(e -> e.getKey() + "=" + e.getValue())
        .collect(Collectors.joining(","));
  }

  /** A step attempt's span. */
  public static String stepSpanId(String instanceId, String taskId, String nodeId, int attempt,
      Map<String, Integer> loopCounts) {
    return digest("wiggle.step\n" + instanceId + "\n" + taskId + "\n" + nodeId + "\n" + attempt
        + "\n" + loopsKey(loopCounts), 8);
  }

  /**
   * Whether the standard OTEL_* variables turn tracing on: an OTLP endpoint, or
   * OTEL_TRACES_EXPORTER naming an exporter, unless OTEL_SDK_DISABLED is true or the exporter is
   * none (the rule of every SDK).
   */
  public static boolean tracingEnabled(Map<String, String> env) {
    if ("true".equalsIgnoreCase(env.getOrDefault("OTEL_SDK_DISABLED", "").strip())) {
      return false;
    }
    String exporter = env.getOrDefault("OTEL_TRACES_EXPORTER", "").strip().toLowerCase();
    if (exporter.equals("none")) {
      return false;
    }
    String endpoint = env.getOrDefault("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
        + env.getOrDefault("OTEL_EXPORTER_OTLP_ENDPOINT", "");
    return !endpoint.isEmpty() || !exporter.isEmpty();
  }
}
