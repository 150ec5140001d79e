package dev.wiggle.worker;

import dev.wiggle.proto.v1.HeartbeatRequest;
import dev.wiggle.proto.v1.HeartbeatResponse;
import dev.wiggle.proto.v1.InstanceStatus;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Keeps every held lease alive: a ticker finds the leases whose heartbeat is due and beats each
 * on a thread of its own, so one slow answer never delays the others. A heartbeat names the step
 * running now, so the server renews the lease by that step's timeout.
 */
final class LeaseKeeper {
  private static final System.Logger LOG = System.getLogger("dev.wiggle.worker");

  private final Rpc rpc;
  private final Map<String, Lease> leases = new ConcurrentHashMap<>();
  private final ScheduledExecutorService ticker;
  private final ExecutorService beats;

  LeaseKeeper(Rpc rpc) {
    this.rpc = rpc;
    this.ticker = Executors.newSingleThreadScheduledExecutor(Threads.named("wiggle-lease-ticker"));
    this.beats = Executors.newCachedThreadPool(Threads.named("wiggle-heartbeat"));
    ticker.scheduleWithFixedDelay(this::tick, 50, 50, TimeUnit.MILLISECONDS);
  }

  void hold(Lease lease) {
    leases.put(lease.taskId, lease);
  }

  void drop(Lease lease) {
    leases.remove(lease.taskId, lease);
  }

  void stop() {
    ticker.shutdownNow();
    beats.shutdownNow();
  }

  private void tick() {
    long now = System.nanoTime();
    List<Lease> due = new ArrayList<>();
    for (Lease l : leases.values()) {
      synchronized (this) {
        if (!l.beating && !l.lost() && l.due(now)) {
          l.beating = true;
          due.add(l);
        }
      }
    }
    for (Lease l : due) {
      try {
        beats.execute(() -> {
          try {
            beat(l);
          } catch (RuntimeException e) { // never let one bad answer kill the keeper
            LOG.log(Level.WARNING, "heartbeat for task " + l.taskId + " failed", e);
          } finally {
            synchronized (this) {
              l.beating = false;
            }
          }
        });
      } catch (java.util.concurrent.RejectedExecutionException e) {
        return; // stopping
      }
    }
  }

  /**
   * Heartbeats {@code l} once, naming the step it runs. An unreachable server is not fatal: the
   * next beat tries again soon, and a local run's lease budget notices a deadline coming close.
   */
  void beat(Lease l) {
    long lengthMs = l.lengthMs();
    String node = l.nodeId();
    long nodeTimeout = l.nodeTimeoutMs();
    HeartbeatResponse r;
    try {
      r = rpc.call(WiggleRpc.HEARTBEAT,
          HeartbeatRequest.newBuilder().setTaskId(l.taskId).setLease(l.token)
              .setNodeId(node == null ? "" : node).build(),
          Math.max(1_000, lengthMs / 3), 0);
    } catch (RpcException e) {
      if (e.gone()) {
        l.lose("heartbeat refused: " + e.getMessage());
        return;
      }
      if (!e.retryable() && !l.warned) {
        l.warned = true; // once per lease: a broken server would flood the log
        LOG.log(Level.WARNING, "heartbeat for task " + l.taskId + " failed: " + e.getMessage());
      }
      l.retrySoon();
      return;
    }
    long received = System.nanoTime();
    if (r.getInstanceStatus() != InstanceStatus.RUNNING) {
      l.lose("instance is " + r.getInstanceStatus());
      return;
    }
    l.renewed(r.getLeaseExpiresAtMs(), r.getServerNowMs(), received, nodeTimeout);
  }
}
