package dev.wiggle.worker;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One leased task: its fencing token, when it runs out, and the numbering of the reports made
 * under it.
 *
 * <p>Clocks: the server answers every lease with its expiry and its own clock ({@code
 * server_now_ms}); what is left is their difference, anchored on this host's monotonic clock at
 * the moment the answer arrived. No synced clocks are needed, and a jump of the wall clock
 * changes nothing. (A server that sends no clock is measured against the wall clock instead.)
 *
 * <p>Length: the lease was last renewed for some step's timeout; a heartbeat is due a third of
 * that length after the last renewal, so one lost heartbeat never costs the lease, and a local
 * run starts another step only while a quarter of it is left.
 */
final class Lease {
  final String taskId;
  final String token;
  /** Shared with every StepInfo of the task: set when the lease is lost. */
  final AtomicBoolean cancelled = new AtomicBoolean();

  private long lengthMs;
  private long deadlineNanos;
  private long renewedAtNanos;
  private String lostWhy;
  private long applied; // the seq of the last report the server applied under this lease
  private String nodeId; // the step running now: heartbeats renew by its timeout
  private long nodeTimeoutMs;
  private Thread handler; // the thread inside a handler, interrupted when the lease is lost
  boolean beating; // a heartbeat is in flight (guarded by the keeper)
  boolean warned; // a failed heartbeat was logged once

  Lease(String taskId, String token, String nodeId, long timeoutMs) {
    this.taskId = taskId;
    this.token = token;
    this.nodeId = nodeId;
    this.lengthMs = timeoutMs > 0 ? timeoutMs : 60_000;
    this.nodeTimeoutMs = this.lengthMs;
  }

  /**
   * A renewal the server reported: {@code expiresAtMs} and {@code serverNowMs} on its clock,
   * received at {@code receivedNanos} on ours. {@code newLengthMs} &gt; 0: the timeout the server
   * renewed it for, when that changed (a step with another timeout).
   */
  synchronized void renewed(long expiresAtMs, long serverNowMs, long receivedNanos, long newLengthMs) {
    if (newLengthMs > 0) {
      lengthMs = newLengthMs;
    }
    long leftMs;
    if (expiresAtMs <= 0) {
      leftMs = lengthMs;
    } else if (serverNowMs > 0) {
      leftMs = expiresAtMs - serverNowMs;
    } else {
      // An older server without a clock: measure against ours once. A nonsense answer (skew)
      // falls back to one lease length.
      leftMs = expiresAtMs - System.currentTimeMillis();
      if (leftMs <= 0 || leftMs > 10 * lengthMs) {
        leftMs = lengthMs;
      }
    }
    deadlineNanos = receivedNanos + TimeUnit.MILLISECONDS.toNanos(leftMs);
    renewedAtNanos = receivedNanos;
  }

  synchronized long remainingMs() {
    return TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
  }

  synchronized long lengthMs() {
    return lengthMs;
  }

  /** Whether a heartbeat is due: a third of the lease has passed since the last renewal. */
  synchronized boolean due(long nowNanos) {
    return nowNanos - renewedAtNanos >= TimeUnit.MILLISECONDS.toNanos(lengthMs / 3);
  }

  /** After a failed heartbeat: try again within a second rather than a third of the lease. */
  synchronized void retrySoon() {
    long third = TimeUnit.MILLISECONDS.toNanos(lengthMs / 3);
    long soon = TimeUnit.MILLISECONDS.toNanos(Math.min(1_000, lengthMs / 6));
    renewedAtNanos = System.nanoTime() - third + soon;
  }

  /**
   * The {@code seq} of the next report: one more than the last the server applied (1 for the
   * first report under this lease). A report refused with an error was not applied, so the next
   * one takes its number again; a resend after a lost answer is the same message, same number.
   */
  synchronized long reportSeq() {
    return applied + 1;
  }

  /** The server applied (answered) the report numbered {@code seq}. */
  synchronized void applied(long seq) {
    applied = Math.max(applied, seq);
  }

  /** The step a local run is about to run, and its timeout (what a heartbeat renews by). */
  synchronized void running(String nodeId, long timeoutMs) {
    this.nodeId = nodeId;
    this.nodeTimeoutMs = timeoutMs > 0 ? timeoutMs : lengthMs;
  }

  synchronized String nodeId() {
    return nodeId;
  }

  synchronized long nodeTimeoutMs() {
    return nodeTimeoutMs;
  }

  void lose(String why) {
    synchronized (this) {
      if (lostWhy != null) {
        return;
      }
      lostWhy = why;
      cancelled.set(true);
      if (handler != null) {
        handler.interrupt();
      }
    }
  }

  synchronized boolean lost() {
    return lostWhy != null;
  }

  /** Lost, or past its expiry on this host's clock: the task is someone else's by now. */
  synchronized boolean over() {
    return lostWhy != null || deadlineNanos - System.nanoTime() <= 0;
  }

  synchronized String lostWhy() {
    return lostWhy;
  }

  synchronized void enterHandler() {
    handler = Thread.currentThread();
    if (lostWhy != null) {
      handler.interrupt();
    }
  }

  void exitHandler() {
    synchronized (this) {
      handler = null;
    }
    // An interrupt meant for the handler must not leak into the worker's own calls.
    Thread.interrupted();
  }
}
