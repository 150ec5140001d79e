package dev.wiggle.worker;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.NullNode;
import java.io.IOException;
import java.util.ArrayDeque;
import java.util.Deque;

/**
 * The JSON codec of contexts, results and payloads, set up so that a value passes through a
 * worker without changing as a JSON number: integers stay exact at any size (int, long, then
 * BigInteger), and a number written with a fraction or an exponent stays exactly that decimal
 * ({@code 4.0} is not turned into {@code 4}, {@code 0.1} is not rounded to a double). A handler
 * that only copies fields therefore returns the numbers it was given.
 */
public final class Json {
  /** The deepest nesting of arrays and objects the server accepts in a JSON value. */
  public static final int MAX_DEPTH = 128;

  private static final ObjectMapper MAPPER =
      JsonMapper.builder(
              JsonFactory.builder()
                  // The server's payload limit is what bounds a value, not Jackson's defaults.
                  .streamReadConstraints(
                      StreamReadConstraints.builder()
                          .maxStringLength(Integer.MAX_VALUE)
                          .maxNumberLength(100_000)
                          .build())
                  .build())
          .nodeFactory(JsonNodeFactory.withExactBigDecimals(true))
          .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
          .build();

  private Json() {}

  /** The shared mapper (thread-safe); use it to convert between JSON trees and your types. */
  public static ObjectMapper mapper() {
    return MAPPER;
  }

  /** The value in UTF-8 JSON bytes; empty bytes are JSON null. */
  public static JsonNode parse(byte[] json) throws IOException {
    if (json == null || json.length == 0) {
      return NullNode.getInstance();
    }
    JsonNode node = MAPPER.readTree(json);
    return node == null ? NullNode.getInstance() : node;
  }

  /** The value in a JSON text. */
  public static JsonNode parse(String json) throws IOException {
    JsonNode node = MAPPER.readTree(json);
    return node == null ? NullNode.getInstance() : node;
  }

  /** The value as compact UTF-8 JSON bytes (null is JSON null). */
  public static byte[] write(JsonNode value) {
    try {
      return MAPPER.writeValueAsBytes(value == null ? NullNode.getInstance() : value);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("a JSON tree always serialises", e);
    }
  }

  /** The value as a compact JSON text. */
  public static String toString(JsonNode value) {
    try {
      return MAPPER.writeValueAsString(value == null ? NullNode.getInstance() : value);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("a JSON tree always serialises", e);
    }
  }

  /** How deeply arrays and objects nest in {@code value}: 0 for a scalar, 1 for {@code []}. */
  public static int depth(JsonNode value) {
    // Iterative, so a hostile value cannot overflow the stack.
    record Item(JsonNode node, int depth) {}
    Deque<Item> todo = new ArrayDeque<>();
    todo.push(new Item(value, 0));
    int max = 0;
    while (!todo.isEmpty()) {
      Item it = todo.pop();
      if (it.node() != null && it.node().isContainerNode()) {
        int d = it.depth() + 1;
        max = Math.max(max, d);
        for (JsonNode child : it.node()) {
          todo.push(new Item(child, d));
        }
      }
    }
    return max;
  }
}
