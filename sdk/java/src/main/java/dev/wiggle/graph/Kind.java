package dev.wiggle.graph;

import java.util.Locale;

/** What a node of the canonical graph does (docs/graph.md). */
public enum Kind {
  TASK,
  PREDICATE,
  FORK,
  JOIN,
  FOREACH,
  SLEEP,
  AWAIT,
  SUBFLOW,
  /** A predicate whose value a CEL expression gives (no activity). */
  CONDITION,
  /** A task whose result CEL expressions give: context keys replaced or added (no activity). */
  SET,
  END;

  /** The kind named by the graph's {@code "kind"} field; null when there is none. */
  public static Kind fromWire(String name) {
    for (Kind k : values()) {
      if (k.wire().equals(name)) {
        return k;
      }
    }
    return null;
  }

  /** The name the graph uses: {@code "task"}, {@code "foreach"}, ... */
  public String wire() {
    return name().toLowerCase(Locale.ROOT);
  }
}
