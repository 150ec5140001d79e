package dev.wiggle.worker;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.MethodDescriptor;
import io.grpc.StatusRuntimeException;
import java.lang.System.Logger.Level;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * The worker's one I/O seam: every call goes through here, with a deadline, retried with backoff
 * while the server cannot be reached. Reports go through a {@link ReportBatcher}, below the
 * retries: a batch that fails as a whole fails each report in it, and each is retried here as
 * its own call would have been. A retried report is the same request message, so it
 * carries the same {@code seq}: the server answers a resend as it answered the first, never
 * applying it twice.
 */
final class Rpc {
  private static final System.Logger LOG = System.getLogger("dev.wiggle.worker");

  private final ReportBatcher batcher;
  private final long callTimeoutMs;
  private final BooleanSupplier stopped;
  private final Runnable reconnectNow;
  private final Outage outage = new Outage();

  /**
   * @param channel carries the bearer token already (see {@link Connection})
   * @param stopped true once the worker stops without draining: retry loops give up at once
   */
  Rpc(Channel channel, long callTimeoutMs, BooleanSupplier stopped) {
    this(channel, callTimeoutMs, stopped, () -> {});
  }

  /**
   * @param reconnectNow asks the channel to reconnect at once rather than after its own backoff
   *     (which grows to minutes): this class's backoff paces the calls, and a server that is back
   *     should be used at the next one
   */
  Rpc(Channel channel, long callTimeoutMs, BooleanSupplier stopped, Runnable reconnectNow) {
    this.batcher = new ReportBatcher(channel);
    this.callTimeoutMs = callTimeoutMs;
    this.stopped = stopped;
    this.reconnectNow = reconnectNow;
  }

  /** The server's request limit, as a task carried it: no report batch is built larger. */
  void noteRequestLimit(long maxRequestBytes) {
    batcher.noteLimit(maxRequestBytes);
  }

  long callTimeoutMs() {
    return callTimeoutMs;
  }

  /** {@code call} with the default deadline and no retries. */
  <Q, R> R call(MethodDescriptor<Q, R> method, Q request) throws RpcException {
    return call(method, request, 0, 0);
  }

  /**
   * Calls {@code method}; while the server is unreachable (UNAVAILABLE, DEADLINE_EXCEEDED) it
   * retries with backoff for up to {@code retryForMs}. Every other failure, and the last
   * unreachable one, is thrown. {@code timeoutMs} 0 is the default deadline.
   */
  <Q, R> R call(MethodDescriptor<Q, R> method, Q request, long timeoutMs, long retryForMs)
      throws RpcException {
    long giveUpAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(retryForMs);
    Backoff backoff = new Backoff();
    String name = method.getBareMethodName();
    while (true) {
      CallOptions options = CallOptions.DEFAULT.withDeadlineAfter(
          timeoutMs > 0 ? timeoutMs : callTimeoutMs, TimeUnit.MILLISECONDS);
      try {
        R response = batcher.call(method, request, options);
        outage.succeeded();
        return response;
      } catch (StatusRuntimeException e) {
        RpcException failure = RpcException.of(name, e);
        if (failure.code() == io.grpc.Status.Code.UNAVAILABLE) {
          reconnectNow.run();
        }
        // CANCELLED that this process did not ask for (a server shutting down cancels the calls
        // it holds) is an answer lost like any other: the call's fate is unknown, try again.
        boolean ours = Thread.currentThread().isInterrupted() || io.grpc.Context.current().isCancelled();
        boolean again = failure.retryable()
            || (failure.code() == io.grpc.Status.Code.CANCELLED && !ours);
        if (!again || stopped.getAsBoolean() || ours) {
          throw failure;
        }
        outage.failed(failure);
        long delayMs = backoff.nextMs();
        if (System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(delayMs) - giveUpAt > 0) {
          throw failure;
        }
        try {
          Thread.sleep(delayMs);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          throw failure;
        }
      }
    }
  }

  /** Capped exponential backoff with jitter: 100 ms, 200 ms, ... up to 5 s. */
  static final class Backoff {
    private long nextMs = 100;

    long nextMs() {
      long d = nextMs;
      nextMs = Math.min(5_000, nextMs * 2);
      return (long) (d * ThreadLocalRandom.current().nextDouble(0.8, 1.2));
    }

    void reset() {
      nextMs = 100;
    }
  }

  /**
   * Logs once when the server becomes unreachable and once when it is back, not per attempt:
   * many threads failing during one outage make one line.
   */
  static final class Outage {
    private long downSince; // System.nanoTime(); 0 while reachable
    private volatile boolean down;

    synchronized void failed(RpcException e) {
      if (!down) {
        down = true;
        downSince = System.nanoTime();
        LOG.log(Level.WARNING, "wiggle server unreachable; retrying with backoff: " + e.getMessage());
      }
    }

    void succeeded() {
      if (!down) { // the common case, without taking the lock
        return;
      }
      synchronized (this) {
        if (down) {
          down = false;
          LOG.log(Level.WARNING, "wiggle server reachable again after "
              + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - downSince) + " ms");
        }
      }
    }
  }
}
