package dev.wiggle.worker;

import sun.misc.Signal;

/**
 * SIGTERM and SIGINT as a request to drain and exit normally. Without a handler of its own the
 * JVM answers either with its shutdown sequence and exit status 143 (130), whatever the drain
 * achieved. {@code sun.misc.Signal} lives in the {@code jdk.unsupported} module, which every JDK
 * ships; a runtime without it keeps the JVM's own handling (the shutdown hook still drains).
 */
final class Signals {
  private Signals() {}

  /** Runs {@code onStop} (once per signal) on SIGTERM and SIGINT instead of stopping the JVM. */
  static void onStop(Runnable onStop) {
    for (String name : new String[] {"TERM", "INT"}) {
      try {
        Signal.handle(new Signal(name), signal -> onStop.run());
      } catch (IllegalArgumentException | UnsupportedOperationException | LinkageError e) {
        // this signal cannot be handled here: the JVM's own handling stays
      }
    }
  }
}
