package dev.wiggle.graph;

/**
 * Who drives a run of steps and when it is committed. A flow may say {@code DEFAULT} (the
 * server's setting); every task a worker receives carries one of the other three.
 */
public enum ExecutionMode {
  /** The server drives: one task per step, one commit per step. */
  SERVER,
  /** The worker chains same-queue steps and reports each before running the next. */
  LOCAL_SYNC,
  /** The worker chains and buffers; it reports at handback, checkpoint or batch size. */
  LOCAL_ASYNC,
  /** Only on definitions: defer to the server's default mode. */
  DEFAULT
}
