package dev.wiggle.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.wiggle.graph.ExecutionMode;
import dev.wiggle.worker.Json;
import dev.wiggle.worker.NonRetryableException;
import dev.wiggle.worker.StepInfo;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The activities of spec/conformance/ACTIVITIES.md, each on inputs whose result is worked out by
 * hand from that document (key order kept, integers exact, a float stays a float).
 */
class ConformanceActivitiesTest {
  private static StepInfo step(String node, int attempt) {
    return new StepInfo("i", node, attempt, "f", "v", "x", ExecutionMode.SERVER, "t");
  }

  private static String task(String name, String input, String node, int attempt) throws Exception {
    JsonNode out = ConformanceActivities.tasks().get(name).execute(Json.parse(input), step(node, attempt));
    return Json.toString(out);
  }

  private static boolean pred(String name, String input, String node) throws Exception {
    return ConformanceActivities.predicates().get(name).test(Json.parse(input), step(node, 1));
  }

  @Test
  void everyActivityOfTheDocumentIsThere() {
    assertEquals(Set.of("noop", "append", "inc", "inc_m", "zero", "double", "fail_times",
        "fail_always", "fail_fatal", "hold", "merge_results", "sum_results", "apply_signal", "grow", "nest"),
        ConformanceActivities.tasks().keySet());
    assertEquals(Set.of("is_true", "lt", "lt_m", "is_even"), ConformanceActivities.predicates().keySet());
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
    "noop|[1,\"two\",null,4.0]|n|[1,\"two\",null,4.0]",
    "append|{\"z\":1,\"trail\":[\"a\"],\"k\":2}|b|{\"z\":1,\"trail\":[\"a\",\"b\"],\"k\":2}",
    "append|{\"trail\":7}|b|{\"trail\":[\"b\"]}",
    "inc|{}|n|{\"n\":1}",
    "inc|{\"n\":9223372036854775806}|n|{\"n\":9223372036854775807}",
    "inc|{\"n\":18446744073709551615,\"k\":9007199254740993}|n|{\"n\":1,\"k\":9007199254740993}",
    "inc|{\"n\":4.0}|n|{\"n\":1}",
    "inc|{\"n\":true}|n|{\"n\":1}",
    "inc|{\"n\":2.5}|n|{\"n\":1}",
    "inc_m|{\"m\":4,\"n\":1}|n|{\"m\":5,\"n\":1}",
    "zero|{\"n\":9,\"a\":1}|n|{\"n\":0,\"a\":1}",
    "double|21|n|42",
    "double|1.5|n|3.0",
    "double|4.0|n|8.0",
    "fail_times|{\"fail_times\":{\"x\":1}}|x|{\"fail_times\":{\"x\":1},\"trail\":[\"x\"]}",
    "merge_results|{\"context\":{\"a\":1},\"results\":{\"l\":2}}|j|{\"a\":1,\"results\":{\"l\":2}}",
    "sum_results|{\"context\":{},\"results\":[1,{\"n\":2},\"x\",{}]}|j|{\"sum\":3}",
    "sum_results|{\"context\":{},\"results\":{\"a\":1,\"b\":0.5}}|j|{\"sum\":1.5}",
    "sum_results|{\"context\":{\"sum\":9},\"results\":[]}|j|{\"sum\":0}",
    "apply_signal|{\"context\":{\"signals\":[1]},\"signal\":{\"s\":2}}|w|{\"signals\":[1,{\"s\":2}]}",
    "apply_signal|{\"context\":{}}|w|{\"signals\":[null]}",
    "grow|{\"grow_bytes\":3}|g|{\"grow_bytes\":3,\"blob\":\"xxx\"}",
    "grow|{\"grow_bytes\":\"3\"}|g|{\"grow_bytes\":\"3\",\"blob\":\"\"}",
    "nest|{\"nest_depth\":2}|g|[[{\"nest_depth\":2}]]",
    "nest|7|g|[7]",
  })
  void tasksComputeTheDocumentedResult(String name, String input, String node, String expected)
      throws Exception {
    assertEquals(expected, task(name, input, node, 2));
  }

  @Test
  void failuresSayWhatTheDocumentSays() {
    Exception e = assertThrows(RuntimeException.class,
        () -> task("fail_times", "{\"fail_times\":{\"x\":2}}", "x", 2));
    assertEquals("planned failure x attempt 2", e.getMessage());
    e = assertThrows(RuntimeException.class, () -> task("fail_always", "{}", "y", 3));
    assertEquals("failure y attempt 3", e.getMessage());
    e = assertThrows(NonRetryableException.class, () -> task("fail_fatal", "{}", "z", 1));
    assertEquals("fatal z", e.getMessage());
    e = assertThrows(NonRetryableException.class, () -> task("append", "[1]", "z", 1));
    assertEquals("conformance: append needs an object", e.getMessage());
    e = assertThrows(NonRetryableException.class, () -> task("double", "\"2\"", "z", 1));
    assertEquals("conformance: double needs a number", e.getMessage());
    e = assertThrows(NonRetryableException.class,
        () -> task("merge_results", "{\"context\":[]}", "z", 1));
    assertEquals("conformance: merge_results needs an object", e.getMessage());
  }

  @Test
  void holdWaitsThenAppends() throws Exception {
    assertEquals("{\"hold_ms\":20,\"trail\":[\"h\"]}", task("hold", "{\"hold_ms\":20}", "h", 1));
  }

  @Test
  void predicatesReadAnythingButAnObjectAsEmpty() throws Exception {
    assertTrue(pred("is_true", "{\"p\":true}", "p"));
    assertTrue(!pred("is_true", "{\"p\":1}", "p"));
    assertTrue(!pred("is_true", "[true]", "p"));
    assertTrue(pred("lt", "{\"n\":1,\"limit\":2}", "x"));
    assertTrue(!pred("lt", "{\"n\":2,\"limit\":2}", "x"));
    assertTrue(!pred("lt", "\"text\"", "x"));
    assertTrue(pred("lt_m", "{\"limit_m\":1}", "x"));
    assertTrue(pred("is_even", "4", "x"));
    assertTrue(pred("is_even", "-12345678901234567890", "x"));
    assertTrue(!pred("is_even", "4.0", "x"));
    assertTrue(!pred("is_even", "true", "x"));
    assertTrue(!pred("is_even", "3", "x"));
  }
}
