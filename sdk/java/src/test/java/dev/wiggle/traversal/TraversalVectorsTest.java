package dev.wiggle.traversal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.wiggle.Repo;
import dev.wiggle.graph.Graph;
import dev.wiggle.graph.GraphParser;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** Every vector of spec/conformance/traversal/: the Java rule agrees with the Python one. */
class TraversalVectorsTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  private static List<Path> files() throws IOException {
    try (Stream<Path> s = Files.list(Repo.root().resolve("spec/conformance/traversal"))) {
      return s.filter(p -> p.toString().endsWith(".json")).sorted().toList();
    }
  }

  @Test
  void theVectorsAreThere() throws IOException {
    assertFalse(files().isEmpty(), "no traversal vectors found");
    // The expression nodes' vectors (condition, set) run with the others.
    assertTrue(files().stream().anyMatch(p -> p.getFileName().toString().equals("expressions.json")),
        "expressions.json is missing");
  }

  @TestFactory
  List<DynamicTest> handbackRule() throws Exception {
    List<DynamicTest> tests = new ArrayList<>();
    for (Path file : files()) {
      if (file.getFileName().toString().equals("lease_budget.json")) {
        continue;
      }
      JsonNode doc = JSON.readTree(file.toFile());
      Graph g = GraphParser.parse(JSON.writeValueAsBytes(doc.get("graph")));
      for (JsonNode c : doc.get("cases")) {
        String name = file.getFileName() + ": " + c.get("description").asText();
        tests.add(DynamicTest.dynamicTest(name, () -> {
          List<String> queues = new ArrayList<>();
          c.get("worker_queues").forEach(q -> queues.add(q.asText()));
          Boolean predicate = c.get("predicate").isNull() ? null : c.get("predicate").asBoolean();
          Move m = Traversal.advance(g, c.get("node").asText(), queues, predicate, counts(c.get("loop_counts")));
          JsonNode e = c.get("expect");
          assertEquals(e.get("next").isNull() ? null : e.get("next").asText(), m.next(), "next");
          assertEquals(counts(e.get("loop_counts")), m.loopCounts(), "loop_counts");
          assertEquals(e.get("handback").isNull() ? null : e.get("handback").asText(),
              m.handback() == null ? null : m.handback().wire(), "handback");
        }));
      }
    }
    return tests;
  }

  @TestFactory
  List<DynamicTest> leaseBudget() throws Exception {
    JsonNode doc = JSON.readTree(Repo.root().resolve("spec/conformance/traversal/lease_budget.json").toFile());
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode c : doc.get("cases")) {
      long remaining = c.get("remaining_ms").asLong();
      long lease = c.get("lease_ms").asLong();
      tests.add(DynamicTest.dynamicTest(remaining + " of " + lease + " ms", () ->
          assertEquals(c.get("expect").asBoolean(), Traversal.leaseBudgetLeft(remaining, lease))));
    }
    return tests;
  }

  private static Map<String, Integer> counts(JsonNode doc) {
    Map<String, Integer> m = new HashMap<>();
    doc.fields().forEachRemaining(e -> m.put(e.getKey(), e.getValue().asInt()));
    return m;
  }
}
