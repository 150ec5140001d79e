package dev.wiggle.graph;

import java.util.Map;

/**
 * One node of the canonical graph. Which fields mean something depends on {@link #kind()}; the
 * others are null, 0 or empty. One flat record rather than a type per kind keeps parsing and the
 * handback rule short, and the canonical form always carries every field of its kind.
 *
 * <p>Edges live on the node that owns them: a task's {@code next}; a predicate's {@code next}
 * (true) and {@code alt} (false; null on a filter: the token ends); a fork's {@code branches}
 * and {@code join}; a join's {@code next}; a foreach's {@code body} and {@code join}; the
 * {@code next} of a sleep, await (and its {@code onTimeout}) and subflow; none on the end.
 *
 * @param id the node id
 * @param kind what the node does
 * @param activity task, predicate, join: the activity a worker runs (an await: its apply's)
 * @param queue the queue of that activity
 * @param timeoutMs the step's start-to-close timeout, the lease length of one attempt (0: none)
 * @param next the node after this one (null where the kind has none)
 * @param checkpoint a task whose result LOCAL_ASYNC flushes at once
 * @param alt a predicate's false edge; null on a filter
 * @param maxIterations a loop's while predicate: the most passes of its body; null otherwise
 * @param branches a fork: branch name to first node
 * @param join a fork or foreach: its join node
 * @param body a foreach: the first node of its body
 * @param onTimeout an await: where the token goes at the deadline (null: no deadline)
 * @param hasApply an await with an apply activity (which a worker runs)
 * @param expression a condition: its CEL expression ({@code if}), as written; null otherwise
 * @param values a set: context key to CEL expression, in the graph's key order; empty otherwise
 */
public record Node(
    String id,
    Kind kind,
    String activity,
    String queue,
    long timeoutMs,
    String next,
    boolean checkpoint,
    String alt,
    Integer maxIterations,
    Map<String, String> branches,
    String join,
    String body,
    String onTimeout,
    boolean hasApply,
    String expression,
    Map<String, String> values) {

  /** Whether a worker runs this node: a task, predicate, join (its combine) or await apply. */
  public boolean isWorkerStep() {
    return switch (kind) {
      case TASK, PREDICATE, JOIN -> true;
      case AWAIT -> hasApply;
      default -> false;
    };
  }

  /**
   * Whether this is an expression node (a condition or a set): whoever holds the token evaluates
   * it on the spot; no activity runs it, so it is never leased and never a handback.
   */
  public boolean isExpression() {
    return kind == Kind.CONDITION || kind == Kind.SET;
  }
}
