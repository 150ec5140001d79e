package dev.wiggle.worker;

import dev.wiggle.graph.ExecutionMode;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The step a handler is running. {@code (instanceId, nodeId, attempt)} is an idempotency key:
 * stable across redeliveries of one attempt, new for each retry. {@link #taskId()} is the leased
 * token the worker was handed; in a local run every step after the first shares the task id of
 * the run's first step.
 */
public final class StepInfo {
  private final String instanceId;
  private final String nodeId;
  private final int attempt;
  private final String flow;
  private final String version;
  private final String activity;
  private final ExecutionMode executionMode;
  private final String taskId;
  private final AtomicBoolean cancelled;

  /** A step as the worker passes it; tests of handlers build one to run them directly. */
  public StepInfo(
      String instanceId,
      String nodeId,
      int attempt,
      String flow,
      String version,
      String activity,
      ExecutionMode executionMode,
      String taskId) {
    this(instanceId, nodeId, attempt, flow, version, activity, executionMode, taskId,
        new AtomicBoolean());
  }

  StepInfo(
      String instanceId,
      String nodeId,
      int attempt,
      String flow,
      String version,
      String activity,
      ExecutionMode executionMode,
      String taskId,
      AtomicBoolean cancelled) {
    this.instanceId = instanceId;
    this.nodeId = nodeId;
    this.attempt = attempt;
    this.flow = flow;
    this.version = version;
    this.activity = activity;
    this.executionMode = executionMode;
    this.taskId = taskId;
    this.cancelled = cancelled;
  }

  public String instanceId() {
    return instanceId;
  }

  public String nodeId() {
    return nodeId;
  }

  /** The attempt number, from 1. Locally chained steps after the first start at 1. */
  public int attempt() {
    return attempt;
  }

  public String flow() {
    return flow;
  }

  public String version() {
    return version;
  }

  public String activity() {
    return activity;
  }

  public ExecutionMode executionMode() {
    return executionMode;
  }

  public String taskId() {
    return taskId;
  }

  /**
   * Whether the lease was lost (the instance was cancelled, or the server gave the task to
   * someone else) or the worker gave up draining: nothing this step returns would be accepted,
   * so a long handler may stop early. The worker also interrupts the handler's thread then.
   */
  public boolean isCancelled() {
    return cancelled.get();
  }

  @Override
  public String toString() {
    return instanceId + "/" + nodeId + "#" + attempt;
  }
}
