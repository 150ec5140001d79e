package dev.wiggle.worker;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.wiggle.graph.Graph;
import dev.wiggle.graph.GraphParser;

/** Small canonical graphs for the worker's tests, built node by node. */
final class Graphs {
  private final ObjectNode doc = JsonNodeFactory.instance.objectNode();
  private final ObjectNode nodes = doc.putObject("nodes");

  Graphs(String start) {
    doc.put("format", 1).put("name", "test").put("execution", "DEFAULT").put("start", start);
    doc.putNull("input");
    nodes.putObject("end").put("kind", "end");
  }

  Graphs task(String id, String queue, String next, boolean checkpoint, long timeoutMs) {
    ObjectNode n = activity(id, "task", queue, timeoutMs);
    n.put("next", next).put("checkpoint", checkpoint);
    return this;
  }

  Graphs task(String id, String next) {
    return task(id, "default", next, false, 60_000);
  }

  Graphs predicate(String id, String next, String alt) {
    ObjectNode n = activity(id, "predicate", "default", 60_000);
    n.put("next", next);
    if (alt == null) {
      n.putNull("alt");
    } else {
      n.put("alt", alt);
    }
    n.putNull("max_iterations");
    return this;
  }

  Graphs condition(String id, String expression, String next, String alt, Integer maxIterations) {
    ObjectNode n = nodes.putObject(id).put("kind", "condition").put("if", expression).put("next", next);
    if (alt == null) {
      n.putNull("alt");
    } else {
      n.put("alt", alt);
    }
    if (maxIterations == null) {
      n.putNull("max_iterations");
    } else {
      n.put("max_iterations", maxIterations);
    }
    return this;
  }

  /** A set node; {@code values} alternates key and CEL source. */
  Graphs set(String id, String next, String... values) {
    ObjectNode n = nodes.putObject(id).put("kind", "set").put("next", next);
    ObjectNode v = n.putObject("values");
    for (int i = 0; i < values.length; i += 2) {
      v.put(values[i], values[i + 1]);
    }
    return this;
  }

  Graphs sleep(String id, String next) {
    nodes.putObject(id).put("kind", "sleep").put("duration_ms", 100).put("next", next).putNull("until");
    return this;
  }

  private ObjectNode activity(String id, String kind, String queue, long timeoutMs) {
    ObjectNode n = nodes.putObject(id).put("kind", kind).put("activity", id).put("queue", queue)
        .put("timeout_ms", timeoutMs);
    n.putObject("retry").put("max_attempts", 3).put("backoff", "fixed").put("initial_ms", 10)
        .put("max_ms", 10);
    return n;
  }

  byte[] bytes() {
    return Json.write(doc);
  }

  Graph graph() {
    try {
      return GraphParser.parse(bytes());
    } catch (dev.wiggle.graph.GraphException e) {
      throw new IllegalStateException(e);
    }
  }
}
