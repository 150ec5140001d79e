package dev.wiggle.traversal;

import dev.wiggle.graph.Graph;
import dev.wiggle.graph.Node;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;

/**
 * The handback rule: after a worker step, where does the token go, and may the worker follow it?
 * A port of wiggle/traversal.py that must agree with it exactly; every vector in
 * spec/conformance/traversal/ checks both.
 *
 * <p>After a task, combine or apply the token moves to {@code next}; after a predicate to {@code
 * next} (true) or {@code alt} (false). The worker keeps going only while that node is a task or
 * predicate on a queue it serves and enough of its lease is left; anything else is a handback.
 * A {@code condition} moves like a predicate and a {@code set} like a task; neither is ever a
 * handback: whoever holds the token evaluates it on the spot.
 */
public final class Traversal {
  private Traversal() {}

  /**
   * The node a completed step at {@code nodeId} leads to (a handback only for FILTERED and
   * LOOP_LIMIT). {@code predicate} is the predicate's (or condition's) value, null for other
   * steps.
   *
   * @throws IllegalArgumentException when the node is not a step a worker runs, or a predicate
   *     has no value: a caller bug, or a path the graph does not have
   */
  public static Move successor(
      Graph g, String nodeId, Boolean predicate, Map<String, Integer> loopCounts) {
    Map<String, Integer> counts = new HashMap<>(loopCounts);
    Node node = g.node(nodeId);
    if (node == null) {
      throw new IllegalArgumentException("node '" + nodeId + "' is not a step a worker runs");
    }
    switch (node.kind()) {
      case TASK, JOIN, SET:
        return new Move(node.next(), Map.copyOf(counts), null);
      case AWAIT:
        if (!node.hasApply()) {
          throw new IllegalArgumentException(
              "await node '" + nodeId + "' has no apply step to complete");
        }
        return new Move(node.next(), Map.copyOf(counts), null);
      case PREDICATE, CONDITION:
        break;
      default:
        throw new IllegalArgumentException("node '" + nodeId + "' is not a step a worker runs");
    }
    if (predicate == null) {
      throw new IllegalArgumentException("predicate '" + nodeId + "' needs a boolean result");
    }
    if (predicate) {
      if (node.maxIterations() != null) {
        // The body already ran once per true result plus the first pass; one more true result
        // would start iteration max_iterations + 1.
        int timesTrue = counts.getOrDefault(nodeId, 0) + 1;
        if (timesTrue >= node.maxIterations()) {
          return new Move(null, Map.copyOf(counts), Handback.LOOP_LIMIT);
        }
        counts.put(nodeId, timesTrue);
      }
      return new Move(node.next(), Map.copyOf(counts), null);
    }
    if (node.maxIterations() != null) {
      counts.remove(nodeId); // the loop exits: a later entry starts counting afresh
    }
    if (node.alt() == null) {
      return new Move(null, Map.copyOf(counts), Handback.FILTERED);
    }
    return new Move(node.alt(), Map.copyOf(counts), null);
  }

  /** Null when a worker serving {@code queues} may run {@code next} itself, else why not. */
  public static Handback classify(Graph g, String next, Collection<String> queues) {
    Node node = g.node(next);
    if (node == null) {
      return Handback.END; // unreachable on a parsed graph: every edge points at a node
    }
    return switch (node.kind()) {
      case SLEEP -> Handback.SLEEP;
      case FORK -> Handback.FORK;
      case JOIN -> Handback.JOIN;
      case FOREACH -> Handback.FOREACH;
      case AWAIT -> Handback.AWAIT;
      case SUBFLOW -> Handback.SUBFLOW;
      case END -> Handback.END;
      case CONDITION, SET -> null; // evaluated where the token is: no queue, no lease
      case TASK, PREDICATE -> queues.contains(node.queue()) ? null : Handback.OTHER_QUEUE;
    };
  }

  /** {@link #successor} then {@link #classify}: the whole decision after one local step. */
  public static Move advance(
      Graph g,
      String nodeId,
      Collection<String> queues,
      Boolean predicate,
      Map<String, Integer> loopCounts) {
    Move m = successor(g, nodeId, predicate, loopCounts);
    if (m.next() == null) {
      return m;
    }
    return new Move(m.next(), m.loopCounts(), classify(g, m.next(), queues));
  }

  /**
   * Whether enough lease remains to start another step locally: at least a quarter of the lease
   * length (the timeout it was last renewed for), so the server never reclaims a lease from a
   * worker that is still making progress.
   */
  public static boolean leaseBudgetLeft(long remainingMs, long leaseMs) {
    return remainingMs * 4 >= leaseMs;
  }
}
