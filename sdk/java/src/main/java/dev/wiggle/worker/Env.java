package dev.wiggle.worker;

import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What running a task needs from its worker: a plain bundle, so tests can build one around an
 * in-process server.
 */
final class Env {
  final Rpc rpc;
  final Registry registry;
  final List<String> queues;
  final LeaseKeeper keeper;
  final Definitions definitions;
  final int localBatchSize;
  final String workerId;
  /** Draining: local runs hand back with reason {@code shutdown} at their next step boundary. */
  volatile boolean draining;
  /** Stopped without draining: runs drop their buffers, retry loops give up. */
  volatile boolean aborted;
  /**
   * 0 until the server first answers AdvanceRun, 1 once it did, -1 once it answered
   * UNIMPLEMENTED (from then on every task runs as a SERVER step).
   */
  final AtomicInteger advanceRun = new AtomicInteger();
  /** One span per step attempt while tracing is on (docs/observability.md); null when off. */
  final StepSpans spans = StepSpans.fromEnvironment(System.getLogger("dev.wiggle.worker"));

  Env(Rpc rpc, Registry registry, List<String> queues, LeaseKeeper keeper, int localBatchSize,
      String workerId) {
    this.rpc = rpc;
    this.registry = registry;
    this.queues = List.copyOf(queues);
    this.keeper = keeper;
    this.definitions = new Definitions(rpc);
    this.localBatchSize = Math.max(1, localBatchSize);
    this.workerId = workerId;
  }

  /** Whether the worker may start another step or ask for more work. */
  boolean stopping() {
    return draining || aborted;
  }
}
