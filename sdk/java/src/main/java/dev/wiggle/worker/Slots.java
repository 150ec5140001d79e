package dev.wiggle.worker;

/**
 * A counter of free task slots that one can wait on. The poller asks for as many tasks as are
 * free and takes the slots over once they arrive; an eager start reserves one meanwhile, so the
 * count may briefly go below zero (the extra task waits for a thread, its lease kept alive).
 */
final class Slots {
  private final int capacity;
  private int free;

  Slots(int capacity) {
    this.capacity = capacity;
    this.free = capacity;
  }

  synchronized int free() {
    return free;
  }

  /** Takes one slot if one is free. */
  synchronized boolean tryTake() {
    if (free <= 0) {
      return false;
    }
    free--;
    return true;
  }

  /** Takes {@code n} slots even when they are not free. */
  synchronized void takeOver(int n) {
    free -= n;
  }

  synchronized void give(int n) {
    free += n;
    notifyAll();
  }

  /** Waits until a slot is free; false on timeout. */
  synchronized boolean awaitFree(long timeoutMs) throws InterruptedException {
    long end = System.currentTimeMillis() + timeoutMs;
    while (free <= 0) {
      long left = end - System.currentTimeMillis();
      if (left <= 0) {
        return false;
      }
      wait(left);
    }
    return true;
  }

  /** Waits until every slot is free again (nothing in flight); false on timeout. */
  synchronized boolean awaitIdle(long timeoutMs) throws InterruptedException {
    long end = System.currentTimeMillis() + timeoutMs;
    while (free < capacity) {
      long left = end - System.currentTimeMillis();
      if (left <= 0) {
        return false;
      }
      wait(left);
    }
    return true;
  }
}
