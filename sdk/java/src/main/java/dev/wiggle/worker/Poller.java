package dev.wiggle.worker;

import dev.wiggle.proto.v1.PollTasksRequest;
import dev.wiggle.proto.v1.PollTasksResponse;
import dev.wiggle.proto.v1.Task;
import io.grpc.Context;
import io.grpc.Status;
import java.lang.System.Logger.Level;
import java.util.List;
import java.util.function.BiConsumer;

/**
 * The poll loop: long-polls for as many tasks as there are free slots, and starts each. The
 * server never leases this worker more tasks than it had free slots when it asked.
 *
 * <p>Stopping: a draining worker asks the server to end its open poll (EndPolls), which answers
 * with what it holds, usually nothing; a task that still arrives is given back (ReleaseTask).
 * The loop never polls again once the worker drains.
 * Only an older server without EndPolls gets its poll cancelled, a race in which the server may
 * lease tasks for a call nobody reads: those leases expire and the tasks are redelivered.
 */
final class Poller implements Runnable {
  private static final System.Logger LOG = System.getLogger("dev.wiggle.worker");

  private final Env env;
  private final Slots slots;
  private final PollTasksRequest.Builder request;
  private final long pollWaitMs;
  private final BiConsumer<Task, Lease> start;
  private final Context.CancellableContext cancel = Context.current().withCancellation();
  private volatile boolean stopped;

  Poller(Env env, Slots slots, int concurrency, long pollWaitMs, String sdk,
      BiConsumer<Task, Lease> start) {
    this.env = env;
    this.slots = slots;
    this.pollWaitMs = pollWaitMs;
    this.start = start;
    this.request = PollTasksRequest.newBuilder()
        .setWorkerId(env.workerId)
        .addAllQueues(env.queues)
        .addAllActivities(env.registry.names())
        .setSlots(concurrency)
        .setWaitMs((int) pollWaitMs)
        .setSdk(sdk);
  }

  /** Stops polling; cancels the call in flight when {@code cancelCall} (EndPolls failed). */
  void stop(boolean cancelCall) {
    stopped = true;
    synchronized (this) {
      notifyAll(); // ends a backoff pause
    }
    if (cancelCall) {
      cancel.cancel(null);
    }
  }

  @Override
  public void run() {
    Rpc.Backoff backoff = new Rpc.Backoff();
    while (!stopped && !env.stopping()) {
      try {
        if (!slots.awaitFree(250)) {
          continue;
        }
      } catch (InterruptedException e) {
        return;
      }
      int want = slots.free();
      if (want <= 0) {
        continue;
      }
      List<Task> tasks;
      try {
        tasks = poll(want);
      } catch (RpcException e) {
        if (stopped) {
          return; // our own cancel (a server without EndPolls)
        }
        // Anything else, a server that cancelled the poll as it shut down included: back off
        // and poll again. The loop only ends when the worker stops.
        if (!e.retryable() && e.code() != Status.Code.CANCELLED) {
          LOG.log(Level.ERROR, "PollTasks failed: " + e.getMessage());
        }
        sleep(backoff.nextMs());
        continue;
      }
      backoff.reset();
      long received = System.nanoTime();
      slots.takeOver(tasks.size());
      for (Task t : tasks) {
        Lease lease = TaskRunner.hold(env, t, received);
        if (env.stopping()) {
          // Polled for, but the worker is draining: give it back without costing an attempt
          // (or, from a server without ReleaseTask, let its lease expire).
          TaskRunner.release(env, t, lease, "shutdown");
          env.keeper.drop(lease);
          slots.give(1);
          continue;
        }
        start.accept(t, lease);
      }
    }
  }

  private List<Task> poll(int maxTasks) throws RpcException {
    PollTasksRequest req = request.setMaxTasks(maxTasks).build();
    try {
      return cancel.call(() -> {
        PollTasksResponse r = env.rpc.call(WiggleRpc.POLL_TASKS, req,
            pollWaitMs + env.rpc.callTimeoutMs(), 0);
        return r.getTasksList();
      });
    } catch (RpcException e) {
      throw e;
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private synchronized void sleep(long ms) {
    try {
      if (!stopped) {
        wait(ms);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      stopped = true;
    }
  }
}
