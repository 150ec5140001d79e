package dev.wiggle.worker;

import dev.wiggle.proto.v1.Task;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A slot reserved for the first task of an instance this process starts itself: reserve it
 * ({@link Worker#reserveEagerSlot()}), start the instance with eager dispatch, then {@link
 * #dispatch} the task the start answered with, or {@link #release} the slot when none came.
 * Exactly one of the two takes effect; the other is a no-op, so try-with-resources is safe.
 * {@link dev.wiggle.client.WiggleClient#startEager} does all of this.
 */
public final class EagerSlot implements AutoCloseable {
  private final Worker worker;
  private final AtomicBoolean used = new AtomicBoolean();

  EagerSlot(Worker worker) {
    this.worker = worker;
  }

  /** The worker the slot belongs to (its id, queues and activities go in the request). */
  public Worker worker() {
    return worker;
  }

  /**
   * Runs {@code task} on this slot as if a poll had returned it; false when the worker began
   * closing since the reservation (the task is then given back to the server).
   */
  public boolean dispatch(Task task) {
    if (!used.compareAndSet(false, true)) {
      return false;
    }
    if (task == null) {
      worker.giveSlot();
      return false;
    }
    return worker.dispatchEager(task);
  }

  /** Frees the slot unused. */
  public void release() {
    if (used.compareAndSet(false, true)) {
      worker.giveSlot();
    }
  }

  @Override
  public void close() {
    release();
  }
}
