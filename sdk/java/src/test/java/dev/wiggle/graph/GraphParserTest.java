package dev.wiggle.graph;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
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

  private static final String EXPRESSIONS = "{\"format\":1,\"name\":\"x\",\"execution\":\"LOCAL_SYNC\","
      + "\"input\":null,\"start\":\"set-1\",\"nodes\":{"
      + "\"set-1\":{\"kind\":\"set\",\"values\":{\"z\":\"ctx.n + 1\",\"a\":\"'x'\"},\"next\":\"if-1\"},"
      + "\"if-1\":{\"kind\":\"condition\",\"if\":\"ctx.n > 1\",\"next\":\"end\",\"alt\":null,"
      + "\"max_iterations\":null},"
      + "\"end\":{\"kind\":\"end\"}}}";

  @Test
  void conditionAndSetNodesParse() throws Exception {
    Graph g = GraphParser.parse(EXPRESSIONS.getBytes(StandardCharsets.UTF_8));
    Node cond = g.node("if-1");
    assertEquals(Kind.CONDITION, cond.kind());
    assertEquals("ctx.n > 1", cond.expression());
    assertEquals("end", cond.next());
    assertNull(cond.alt());
    assertNull(cond.maxIterations());
    assertTrue(cond.isExpression());
    assertFalse(cond.isWorkerStep());
    Node set = g.node("set-1");
    assertEquals(Kind.SET, set.kind());
    assertEquals(List.of("z", "a"), List.copyOf(set.values().keySet()), "kept in the graph's order");
    assertEquals("ctx.n + 1", set.values().get("z"));
    assertEquals("if-1", set.next());
    assertTrue(set.isExpression());
    assertFalse(set.isWorkerStep());
    assertNull(set.activity());
  }

  @Test
  void aConditionWithoutAnExpressionIsRefused() {
    String doc = EXPRESSIONS.replace("\"if\":\"ctx.n > 1\",", "");
    GraphException e = assertThrows(GraphException.class,
        () -> GraphParser.parse(doc.getBytes(StandardCharsets.UTF_8)));
    assertTrue(e.getMessage().contains("if-1"), e.getMessage());
  }

  @Test
  void aSetWhoseValueIsNotAStringIsRefused() {
    String doc = EXPRESSIONS.replace("\"ctx.n + 1\"", "1");
    GraphException e = assertThrows(GraphException.class,
        () -> GraphParser.parse(doc.getBytes(StandardCharsets.UTF_8)));
    assertTrue(e.getMessage().contains("set-1"), e.getMessage());
  }

  @Test
  void aSetWithoutNextIsRefused() {
    String doc = EXPRESSIONS.replace(",\"next\":\"if-1\"", "");
    GraphException e = assertThrows(GraphException.class,
        () -> GraphParser.parse(doc.getBytes(StandardCharsets.UTF_8)));
    assertTrue(e.getMessage().contains("set needs next"), e.getMessage());
  }
}
