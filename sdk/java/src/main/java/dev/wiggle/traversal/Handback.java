package dev.wiggle.traversal;

/**
 * Why a worker stops chaining steps and gives the token back to the server. {@link #wire()} is
 * the {@code handback_reason} string AdvanceRun carries (the same names as wiggle/traversal.py).
 */
public enum Handback {
  /** The next node is a timer. */
  SLEEP("sleep"),
  /** The next node fans out to parallel branches. */
  FORK("fork"),
  /** The next node is a barrier across siblings. */
  JOIN("join"),
  /** The next node fans out over a collection. */
  FOREACH("foreach"),
  /** The next node waits for a signal. */
  AWAIT("await"),
  /** The next node starts a child instance. */
  SUBFLOW("subflow"),
  /** The next step runs on a queue this worker does not serve. */
  OTHER_QUEUE("other_queue"),
  /** The token reached the end of the flow. */
  END("end"),
  /** A filter was false: the token ends. */
  FILTERED("filtered"),
  /** A loop's while was true once too often. */
  LOOP_LIMIT("loop_limit"),
  /** The step failed: the server applies its retry policy. */
  STEP_FAILED("step_failed"),
  /** Too little of the lease is left to start another step. */
  LEASE_BUDGET("lease_budget"),
  /** The server says the instance is no longer RUNNING. */
  NOT_RUNNING("not_running"),
  /** The worker is draining before it exits. */
  SHUTDOWN("shutdown"),
  /** The next step's activity is not registered on this worker (another worker has it). */
  UNKNOWN_ACTIVITY("unknown_activity");

  private final String wire;

  Handback(String wire) {
    this.wire = wire;
  }

  /** The reason as the wire and the event log spell it. */
  public String wire() {
    return wire;
  }

  /** The reason spelt {@code wire}; null when there is none (keep going). */
  public static Handback fromWire(String wire) {
    for (Handback h : values()) {
      if (h.wire.equals(wire)) {
        return h;
      }
    }
    return null;
  }
}
