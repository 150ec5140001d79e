package dev.wiggle.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Numbers pass through the worker's JSON codec as they were written. */
class JsonTest {
  @ParameterizedTest
  @ValueSource(strings = {
    "12345678901234567890123456789",  // beyond 2^64
    "9007199254740993",               // 2^53 + 1: a double would round it
    "-1",
    "4.0",                            // a float that is whole stays a float
    "0.1",
    "3.141592653589793238462643383279", // more digits than a double holds
    "[1,2.50,{\"a\":-0.0001}]",
  })
  void numbersRoundTripExactly(String text) throws Exception {
    assertEquals(text, new String(Json.write(Json.parse(text.getBytes(StandardCharsets.UTF_8))),
        StandardCharsets.UTF_8));
  }

  @Test
  void keysKeepTheirOrderAndTextItsCharacters() throws Exception {
    String text = "{\"z\":1,\"a\":\"ünïcödé \\\"q\\\"\",\"m\":null}";
    assertEquals(text, Json.toString(Json.parse(text)));
  }

  @Test
  void emptyBytesAreNull() throws Exception {
    assertEquals("null", Json.toString(Json.parse(new byte[0])));
  }

  @Test
  void depthCountsNestedContainers() throws Exception {
    assertEquals(0, Json.depth(Json.parse("7")));
    assertEquals(1, Json.depth(Json.parse("[]")));
    assertEquals(3, Json.depth(Json.parse("{\"a\":[1,{\"b\":2}],\"c\":[]}")));
    JsonNode deep = Json.parse("[".repeat(200) + "]".repeat(200));
    assertEquals(200, Json.depth(deep));
  }
}
