package dev.wiggle.expressions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.wiggle.Repo;
import dev.wiggle.worker.Json;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Every case of spec/conformance/expressions/vectors.json under the Java evaluator: each gives
 * the JSON value its expression must evaluate to (1 and 1.0 equal, 1 and true not), or the kind
 * of error it must fail with. The contexts are read with the SDK's own codec (Json), as a worker
 * reads them, and also as plain Java values.
 */
class ExpressionVectorsTest {
  private static JsonNode cases() throws Exception {
    return Json.parse(
        Files.readAllBytes(Repo.root().resolve("spec/conformance/expressions/vectors.json")))
        .get("cases");
  }

  @Test
  void theVectorsAreThereAndNameKindsOfTheProfile() throws Exception {
    JsonNode cases = cases();
    assertTrue(cases.size() >= 100, "vector count " + cases.size()); // the file is there, whole
    Set<String> names = new HashSet<>();
    for (JsonNode c : cases) {
      assertTrue(names.add(c.get("name").asText()), "duplicate name " + c.get("name"));
      if (c.has("error")) {
        assertTrue(EvaluationException.KINDS.contains(c.get("error").asText()), c.toString());
      }
    }
  }

  @TestFactory
  List<DynamicTest> vectors() throws Exception {
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode c : cases()) {
      // No case is about the time limit (TimeLimits).
      tests.add(
          DynamicTest.dynamicTest(c.get("name").asText(), () -> TimeLimits.roomy(() -> run(c))));
    }
    return tests;
  }

  /** spec/conformance/expressions/sizes.json: the size budget's cases (docs/expressions.md). */
  @TestFactory
  List<DynamicTest> sizeBudgetVectors() throws Exception {
    JsonNode cases =
        Json.parse(Files.readAllBytes(Repo.root().resolve("spec/conformance/expressions/sizes.json")))
            .get("cases");
    assertTrue(cases.size() >= 23, "size budget cases: " + cases.size());
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode c : cases) {
      // No case is about the time limit (TimeLimits).
      tests.add(
          DynamicTest.dynamicTest(c.get("name").asText(), () -> TimeLimits.roomy(() -> run(c))));
    }
    return tests;
  }

  /**
   * spec/conformance/expressions/time.json: the time limit's cases, each with its context built
   * first. Each error case runs for a brief limit (TimeLimits.brief), twice (run). No case
   * asserts how fast it ran: the limit is wall-clock time, which a loaded machine stretches.
   *
   * <p>An error case runs under a tenth of the profile's limit: it would run for ten seconds or more
   * without it, and must end with the limit's error (or the size budget's). What a value case checks is
   * that the evaluation is linear: it takes a tenth of a second on an idle machine, a search or a
   * loop that is not takes minutes. It runs under a limit of a minute (TimeLimits), which a loaded
   * machine cannot make the first reach, and the second still does (runWithin).
   */
  /** The profile's limit (docs/expressions.md): the error cases below run under a briefer one. */
  @Test
  void theProfileTimeLimitIsOneSecond() {
    assertEquals(TimeUnit.SECONDS.toNanos(1), Sizes.TIME_LIMIT_NANOS);
    assertEquals(Sizes.TIME_LIMIT_NANOS, Sizes.timeLimitNanos);
  }

  @TestFactory
  List<DynamicTest> timeLimitVectors() throws Exception {
    JsonNode cases =
        Json.parse(Files.readAllBytes(Repo.root().resolve("spec/conformance/expressions/time.json")))
            .get("cases");
    assertTrue(cases.size() >= 11, "time limit cases: " + cases.size());
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode c : cases) {
      tests.add(DynamicTest.dynamicTest(c.get("name").asText(), () -> runTimeCase(c)));
    }
    return tests;
  }

  private static void runTimeCase(JsonNode c) throws Throwable {
    JsonNode builtCase = ((ObjectNode) c.deepCopy()).set("ctx", built(c.get("ctx")));
    if (c.has("error")) {
      EvaluationException[] got = new EvaluationException[1];
      TimeLimits.brief(() -> got[0] = run(builtCase));
      EvaluationException err = got[0];
      assertTrue(
          Sizes.OVER_TIME.equals(err.detail()) || Sizes.OVER.equals(err.detail()),
          err.getMessage());
    } else {
      TimeLimits.roomy(() -> runWithin(builtCase));
    }
  }

  /**
   * A context of time.json with each object of one key that begins with {@code $} built, as the
   * file's comment says: {"$repeat": [s, n]} s n times, {"$range": n} the ints 0 to n-1,
   * {"$fill": [v, n]} n copies of v, each built anew, {"$concat": [a, b, ...]} the strings joined.
   */
  static JsonNode built(JsonNode v) {
    JsonNodeFactory f = JsonNodeFactory.instance;
    if (v.isObject() && v.size() == 1 && v.fieldNames().next().startsWith("$")) {
      String op = v.fieldNames().next();
      JsonNode args = v.get(op);
      switch (op) {
        case "$repeat":
          return f.textNode(built(args.get(0)).textValue().repeat(args.get(1).intValue()));
        case "$range": {
          ArrayNode out = f.arrayNode();
          for (int i = 0; i < args.intValue(); i++) {
            out.add(i);
          }
          return out;
        }
        case "$fill": {
          ArrayNode out = f.arrayNode();
          for (int i = 0; i < args.get(1).intValue(); i++) {
            out.add(built(args.get(0)));
          }
          return out;
        }
        case "$concat": {
          StringBuilder out = new StringBuilder();
          args.forEach(a -> out.append(built(a).textValue()));
          return f.textNode(out.toString());
        }
        default:
          throw new IllegalArgumentException("cannot build " + v);
      }
    }
    if (v.isObject()) {
      ObjectNode out = f.objectNode();
      v.fields().forEachRemaining(e -> out.set(e.getKey(), built(e.getValue())));
      return out;
    }
    if (v.isArray()) {
      ArrayNode out = f.arrayNode();
      v.forEach(e -> out.add(built(e)));
      return out;
    }
    return v;
  }

  /**
   * Checks case c, and that it ended within the limit. The listener reads the clock at every
   * comprehension step and every 16th node, so a single search that is not linear could end
   * minutes late with its value: the clock is read once more here, as the limit would.
   */
  private static void runWithin(JsonNode c) throws Exception {
    long start = System.nanoTime();
    run(c);
    long took = System.nanoTime() - start;
    assertTrue(took < Sizes.timeLimitNanos, c.get("expr").asText() + " took " + took + " ns");
  }

  /** Checks case c; its error, if it is an error case (the last, of the two contexts). */
  @SuppressWarnings("unchecked")
  private static EvaluationException run(JsonNode c) throws Exception {
    String expr = c.get("expr").asText();
    Expression e = Expression.compile(expr);
    // As a worker sees it (Jackson tree, exact decimals), and as plain Java values.
    Object treeCtx = c.get("ctx");
    Object plainCtx = Json.mapper().convertValue(c.get("ctx"), Object.class);
    Map<String, Object> instance =
        c.has("instance") ? Json.mapper().convertValue(c.get("instance"), Map.class) : null;
    EvaluationException last = null;
    for (Object ctx : new Object[] {treeCtx, plainCtx}) {
      if (c.has("error")) {
        EvaluationException err =
            assertThrows(EvaluationException.class, () -> e.evaluate(ctx, instance),
                () -> expr + " should fail with " + c.get("error").asText());
        assertEquals(c.get("error").asText(), err.kind(), err.getMessage());
        assertTrue(err.getMessage().startsWith("expression '" + expr + "' failed ("), err.getMessage());
        last = err;
      } else {
        Object got = e.evaluate(ctx, instance);
        if (!same(c.get("value"), got)) {
          fail(expr + " gave " + got + ", want " + c.get("value"));
        }
      }
    }
    return last;
  }

  /** JSON equality that tells 1 from true and 1 from 1.5, but not 1 from 1.0. */
  static boolean same(JsonNode want, Object got) {
    if (want.isNull()) {
      return got == null;
    }
    if (want.isBoolean()) {
      return got instanceof Boolean b && b == want.booleanValue();
    }
    if (want.isTextual()) {
      return want.textValue().equals(got);
    }
    if (want.isNumber()) {
      return (got instanceof Long || got instanceof Double)
          && new BigDecimal(got.toString()).compareTo(want.decimalValue()) == 0;
    }
    if (want.isArray()) {
      if (!(got instanceof List<?> l) || l.size() != want.size()) {
        return false;
      }
      for (int i = 0; i < l.size(); i++) {
        if (!same(want.get(i), l.get(i))) {
          return false;
        }
      }
      return true;
    }
    if (want.isObject()) {
      if (!(got instanceof Map<?, ?> m) || m.size() != want.size()) {
        return false;
      }
      Iterator<Map.Entry<String, JsonNode>> it = want.fields();
      while (it.hasNext()) {
        Map.Entry<String, JsonNode> f = it.next();
        if (!m.containsKey(f.getKey()) || !same(f.getValue(), m.get(f.getKey()))) {
          return false;
        }
      }
      return true;
    }
    return false;
  }
}
