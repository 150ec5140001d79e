package dev.wiggle.expressions;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeType;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * How JSON values become CEL values and CEL results become JSON (docs/expressions.md, "JSON and
 * CEL"). A number's value decides its CEL type, never its spelling: an integral number within
 * ±(2^53 - 1) is a CEL int (a {@code Long}), any other number a double. The way back writes an
 * integral double within that range as an integer.
 */
final class Values {
  /** 2^53 - 1, the largest integer every implementation's JSON reads exactly. */
  static final long MAX_SAFE_INTEGER = (1L << 53) - 1;

  private static final DateTimeFormatter SECONDS =
      DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss").withZone(ZoneOffset.UTC);

  private Values() {}

  /** A value that is not JSON (in) or has no JSON form (out). */
  static final class NotJson extends Exception {
    NotJson(String message) {
      super(message);
    }
  }

  /**
   * The CEL form of a JSON-decoded value: null, Boolean, String, any Number, List, Map with
   * String keys, or a Jackson JsonNode.
   */
  static Object toCel(Object value) throws NotJson {
    if (value == null) {
      return dev.cel.common.values.NullValue.NULL_VALUE;
    }
    if (value instanceof Boolean || value instanceof String) {
      return value;
    }
    if (value instanceof Number n) {
      return number(n);
    }
    if (value instanceof List<?> l) {
      List<Object> out = new ArrayList<>(l.size());
      for (Object v : l) {
        out.add(toCel(v));
      }
      return out;
    }
    if (value instanceof Map<?, ?> m) {
      Map<String, Object> out = new LinkedHashMap<>();
      for (Map.Entry<?, ?> e : m.entrySet()) {
        if (!(e.getKey() instanceof String k)) {
          throw new NotJson("a map key " + e.getKey() + " is not a string");
        }
        out.put(k, toCel(e.getValue()));
      }
      return out;
    }
    if (value instanceof JsonNode node) {
      return node(node);
    }
    throw new NotJson("not a JSON value: " + value.getClass().getName());
  }

  private static Object node(JsonNode node) throws NotJson {
    JsonNodeType t = node.getNodeType();
    switch (t) {
      case NULL, MISSING:
        return dev.cel.common.values.NullValue.NULL_VALUE;
      case BOOLEAN:
        return node.booleanValue();
      case STRING:
        return node.textValue();
      case NUMBER:
        return number(node.numberValue());
      case ARRAY: {
        List<Object> out = new ArrayList<>(node.size());
        for (JsonNode v : node) {
          out.add(node(v));
        }
        return out;
      }
      case OBJECT: {
        Map<String, Object> out = new LinkedHashMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = node.fields();
        while (it.hasNext()) {
          Map.Entry<String, JsonNode> e = it.next();
          out.put(e.getKey(), node(e.getValue()));
        }
        return out;
      }
      default:
        throw new NotJson("not a JSON value: a " + t + " node");
    }
  }

  /** An integral value within ±(2^53 - 1) is a Long, any other number a Double. */
  private static Object number(Number n) throws NotJson {
    if (n instanceof Long || n instanceof Integer || n instanceof Short || n instanceof Byte) {
      long v = n.longValue();
      return Math.abs(v) <= MAX_SAFE_INTEGER ? (Object) v : (Object) (double) v;
    }
    if (n instanceof BigInteger b) {
      return b.bitLength() <= 53 ? (Object) b.longValue() : (Object) b.doubleValue();
    }
    if (n instanceof BigDecimal d) {
      if (d.signum() == 0) {
        return 0L;
      }
      BigDecimal s = d.stripTrailingZeros();
      if (s.scale() <= 0 && s.precision() - s.scale() <= 16) {
        BigInteger b = s.toBigIntegerExact();
        if (b.bitLength() <= 53) {
          return b.longValue();
        }
      }
      return d.doubleValue();
    }
    double v = n.doubleValue();
    if (Double.isNaN(v) || Double.isInfinite(v)) {
      throw new NotJson("the number " + v + " is not JSON");
    }
    if (v == Math.rint(v) && Math.abs(v) <= MAX_SAFE_INTEGER) {
      return (long) v;
    }
    return v;
  }

  /**
   * The JSON form of a CEL result: null, Boolean, String, Long, Double, List, Map (String keys),
   * the ISO text of a timestamp or duration; NotJson when it has none.
   */
  static Object fromCel(Object value) throws NotJson {
    if (value == null
        || value instanceof dev.cel.common.values.NullValue
        || value instanceof com.google.protobuf.NullValue) {
      return null;
    }
    if (value instanceof Boolean || value instanceof String) {
      return value;
    }
    if (value instanceof Long l) {
      if (Math.abs(l) <= MAX_SAFE_INTEGER) {
        return l;
      }
      throw new NotJson(
          "the integer " + l + " is outside ±(2^53 - 1): JSON cannot carry it exactly");
    }
    if (value instanceof Double d) {
      if (d.isNaN() || d.isInfinite()) {
        throw new NotJson("the double " + d + " has no JSON form");
      }
      if (d == Math.rint(d) && Math.abs(d) <= MAX_SAFE_INTEGER) {
        return (long) (double) d;
      }
      return d;
    }
    if (value instanceof List<?> l) {
      List<Object> out = new ArrayList<>(l.size());
      for (Object v : l) {
        out.add(fromCel(v));
      }
      return out;
    }
    if (value instanceof Map<?, ?> m) {
      Map<String, Object> out = new LinkedHashMap<>();
      for (Map.Entry<?, ?> e : m.entrySet()) {
        if (!(e.getKey() instanceof String k)) {
          throw new NotJson("a map key " + e.getKey() + " is not a string; JSON object keys are");
        }
        out.put(k, fromCel(e.getValue()));
      }
      return out;
    }
    if (value instanceof Instant i) {
      return timestamp(i.getEpochSecond(), i.getNano());
    }
    if (value instanceof com.google.protobuf.Timestamp t) {
      return timestamp(t.getSeconds(), t.getNanos());
    }
    if (value instanceof java.time.Duration d) {
      return duration(d.getSeconds(), d.getNano());
    }
    if (value instanceof com.google.protobuf.Duration d) {
      return duration(d.getSeconds(), d.getNanos());
    }
    if (value instanceof dev.cel.common.values.CelByteString
        || value instanceof com.google.protobuf.ByteString
        || value instanceof byte[]) {
      throw new NotJson("a bytes value has no JSON form (convert it with string())");
    }
    if (value instanceof Number) {
      // an unsigned int (UnsignedLong) or another numeric type the profile does not use
      throw new NotJson("a " + value.getClass().getSimpleName() + " value has no JSON form");
    }
    throw new NotJson("a " + value.getClass().getSimpleName() + " value has no JSON form");
  }

  /** RFC 3339 in UTC with Z; the fraction truncated to microseconds, trailing zeros dropped. */
  static String timestamp(long seconds, int nanos) {
    return SECONDS.format(Instant.ofEpochSecond(seconds)) + fraction(nanos / 1000) + "Z";
  }

  /** Seconds followed by s, with the same fraction rule: 5400s, 1.5s, -0.000001s. */
  static String duration(long seconds, int nanos) {
    // Normalise to a sign and a magnitude in microseconds (truncated toward zero).
    BigInteger micros =
        BigInteger.valueOf(seconds).multiply(BigInteger.valueOf(1_000_000))
            .add(BigInteger.valueOf(nanos / 1000));
    String sign = micros.signum() < 0 ? "-" : "";
    BigInteger[] qr = micros.abs().divideAndRemainder(BigInteger.valueOf(1_000_000));
    return sign + qr[0] + fraction(qr[1].intValue()) + "s";
  }

  private static String fraction(int micros) {
    if (micros == 0) {
      return "";
    }
    String f = String.format("%06d", micros);
    int end = f.length();
    while (f.charAt(end - 1) == '0') {
      end--;
    }
    return "." + f.substring(0, end);
  }
}
