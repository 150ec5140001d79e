package dev.wiggle.graph;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Reads a canonical graph and checks that it is well formed: known kinds (expression nodes,
 * {@code condition} and {@code set}, included), the fields each kind
 * needs, every edge pointing at a node that exists. Only structure is checked, not the whole
 * graph schema: a worker trusts the server's compiler and needs only to walk the graph without
 * meeting a dangling edge. Nothing here does I/O.
 */
public final class GraphParser {
  private static final ObjectMapper JSON = new ObjectMapper();

  private GraphParser() {}

  /** The graph in {@code canonical}; its version is the hash of exactly these bytes. */
  public static Graph parse(byte[] canonical) throws GraphException {
    JsonNode doc;
    try {
      doc = JSON.readTree(canonical);
    } catch (IOException e) {
      throw new GraphException("graph: not JSON: " + e.getMessage(), e);
    }
    if (doc == null || !doc.isObject()) {
      throw new GraphException("graph: not a JSON object");
    }
    if (doc.path("format").asInt(-1) != 1) {
      throw new GraphException("graph: unsupported format " + doc.path("format"));
    }
    ExecutionMode mode;
    try {
      mode = ExecutionMode.valueOf(doc.path("execution").asText(""));
    } catch (IllegalArgumentException e) {
      throw new GraphException("graph: unknown execution mode " + doc.path("execution"), e);
    }
    JsonNode nodesDoc = doc.path("nodes");
    if (!nodesDoc.isObject()) {
      throw new GraphException("graph: nodes is not an object");
    }
    // Sorted, so the first problem reported does not depend on the document's key order.
    Map<String, JsonNode> sorted = new TreeMap<>();
    nodesDoc.fields().forEachRemaining(e -> sorted.put(e.getKey(), e.getValue()));
    Map<String, Node> nodes = new LinkedHashMap<>();
    for (Map.Entry<String, JsonNode> e : sorted.entrySet()) {
      nodes.put(e.getKey(), node(e.getKey(), e.getValue()));
    }
    String start = doc.path("start").asText("");
    if (!nodes.containsKey(start)) {
      throw new GraphException("graph: start node '" + start + "' does not exist");
    }
    for (Node n : nodes.values()) {
      for (String to : edges(n)) {
        if (!nodes.containsKey(to)) {
          throw new GraphException(
              "graph: node '" + n.id() + "': edge to '" + to + "', which does not exist");
        }
      }
    }
    return new Graph(
        doc.path("name").asText(""), Graph.versionOf(canonical), mode, start, Map.copyOf(nodes));
  }

  private static Node node(String id, JsonNode d) throws GraphException {
    if (!d.isObject()) {
      throw new GraphException("graph: node '" + id + "' is not an object");
    }
    Kind kind = Kind.fromWire(d.path("kind").asText(""));
    if (kind == null) {
      throw new GraphException("graph: node '" + id + "': unknown kind " + d.path("kind"));
    }
    String activity = text(d, "activity");
    String queue = text(d, "queue");
    long timeoutMs = d.path("timeout_ms").asLong(0);
    JsonNode apply = d.path("apply");
    boolean hasApply = kind == Kind.AWAIT && apply.isObject();
    if (hasApply) {
      activity = text(apply, "activity");
      queue = text(apply, "queue");
      timeoutMs = apply.path("timeout_ms").asLong(0);
      if (activity == null || queue == null) {
        throw new GraphException("graph: node '" + id + "': await apply needs activity and queue");
      }
    }
    if ((kind == Kind.TASK || kind == Kind.PREDICATE || kind == Kind.JOIN)
        && (activity == null || queue == null || !d.path("retry").isObject())) {
      throw new GraphException(
          "graph: node '" + id + "': " + kind.wire() + " needs activity, queue and retry");
    }
    Map<String, String> branches = new LinkedHashMap<>();
    if (kind == Kind.FORK) {
      d.path("branches").fields().forEachRemaining(b -> branches.put(b.getKey(), b.getValue().asText()));
      if (branches.isEmpty()) {
        throw new GraphException("graph: node '" + id + "': fork without branches");
      }
    }
    String expression = null;
    Map<String, String> values = new LinkedHashMap<>();
    if (kind == Kind.CONDITION) {
      expression = text(d, "if");
      if (expression == null) {
        throw new GraphException("graph: node '" + id + "': condition needs if (a CEL expression)");
      }
    }
    if (kind == Kind.SET) {
      JsonNode v = d.path("values");
      if (!v.isObject()) {
        throw new GraphException("graph: node '" + id + "': set needs values (an object)");
      }
      Iterator<Map.Entry<String, JsonNode>> it = v.fields();
      while (it.hasNext()) {
        Map.Entry<String, JsonNode> e = it.next();
        if (!e.getValue().isTextual()) {
          throw new GraphException("graph: node '" + id + "': set value '" + e.getKey()
              + "' is not a string (a CEL expression)");
        }
        values.put(e.getKey(), e.getValue().textValue());
      }
    }
    JsonNode maxIter = d.path("max_iterations");
    return new Node(
        id,
        kind,
        activity,
        queue,
        timeoutMs,
        text(d, "next"),
        d.path("checkpoint").asBoolean(false),
        text(d, "alt"),
        maxIter.isIntegralNumber() ? maxIter.intValue() : null,
        Map.copyOf(branches),
        text(d, "join"),
        text(d, "body"),
        text(d, "on_timeout"),
        hasApply,
        expression,
        Collections.unmodifiableMap(values));
  }

  private static List<String> edges(Node n) throws GraphException {
    List<String> edges = new ArrayList<>();
    switch (n.kind()) {
      case TASK, PREDICATE, JOIN, SLEEP, SUBFLOW, AWAIT, CONDITION, SET -> edges.add(need(n, n.next(), "next"));
      case FORK -> {
        edges.addAll(n.branches().values());
        edges.add(need(n, n.join(), "join"));
      }
      case FOREACH -> {
        edges.add(need(n, n.body(), "body"));
        edges.add(need(n, n.join(), "join"));
      }
      case END -> {}
    }
    if (n.alt() != null) {
      edges.add(n.alt());
    }
    if (n.onTimeout() != null) {
      edges.add(n.onTimeout());
    }
    return edges;
  }

  private static String need(Node n, String edge, String field) throws GraphException {
    if (edge == null) {
      throw new GraphException("graph: node '" + n.id() + "': " + n.kind().wire() + " needs " + field);
    }
    return edge;
  }

  private static String text(JsonNode d, String field) {
    JsonNode v = d.get(field);
    return v == null || !v.isTextual() ? null : v.asText();
  }
}
