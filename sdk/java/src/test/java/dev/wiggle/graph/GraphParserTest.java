package dev.wiggle.graph;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.wiggle.Repo;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** Every canonical graph of spec/conformance/compile/valid/ parses and hashes to its version. */
class GraphParserTest {
  @TestFactory
  List<DynamicTest> compileVectors() throws Exception {
    Path dir = Repo.root().resolve("spec/conformance/compile");
    JsonNode index = new ObjectMapper().readTree(dir.resolve("index.json").toFile());
    List<DynamicTest> tests = new ArrayList<>();
    index.fields().forEachRemaining(e -> {
      String flow = e.getKey();
      String stem = flow.substring(0, flow.lastIndexOf('.'));
      Path expected = dir.resolve("valid").resolve(stem + ".expected.json");
      tests.add(DynamicTest.dynamicTest(flow, () -> {
        Graph g = GraphParser.parse(Files.readAllBytes(expected));
        assertEquals(e.getValue().asText(), g.version());
        assertNotNull(g.node(g.start()));
        for (Node n : g.nodes().values()) {
          if (n.isWorkerStep()) {
            assertNotNull(n.activity(), n.id());
            assertNotNull(n.queue(), n.id());
          }
        }
      }));
    });
    assertTrue(tests.size() > 5, "too few compile vectors: " + tests.size());
    return tests;
  }

  @Test
  void aDanglingEdgeIsRefused() {
    String doc = "{\"format\":1,\"name\":\"x\",\"execution\":\"SERVER\",\"input\":null,\"start\":\"a\","
        + "\"nodes\":{\"a\":{\"kind\":\"task\",\"activity\":\"a\",\"queue\":\"default\","
        + "\"retry\":{},\"timeout_ms\":1000,\"next\":\"nowhere\",\"checkpoint\":false}}}";
    GraphException e = assertThrows(GraphException.class,
        () -> GraphParser.parse(doc.getBytes(StandardCharsets.UTF_8)));
    assertTrue(e.getMessage().contains("nowhere"), e.getMessage());
  }

  @Test
  void anUnknownKindIsRefused() {
    String doc = "{\"format\":1,\"name\":\"x\",\"execution\":\"SERVER\",\"start\":\"a\","
        + "\"nodes\":{\"a\":{\"kind\":\"teleport\"}}}";
    GraphException e = assertThrows(GraphException.class,
        () -> GraphParser.parse(doc.getBytes(StandardCharsets.UTF_8)));
    assertTrue(e.getMessage().contains("teleport"), e.getMessage());
  }
}
