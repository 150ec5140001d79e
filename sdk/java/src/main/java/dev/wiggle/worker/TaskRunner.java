package dev.wiggle.worker;

import com.google.protobuf.ByteString;
import dev.wiggle.graph.ExecutionMode;
import dev.wiggle.graph.Graph;
import dev.wiggle.graph.Node;
import dev.wiggle.proto.v1.CompleteTaskRequest;
import dev.wiggle.proto.v1.EagerDispatch;
import dev.wiggle.proto.v1.FailTaskRequest;
import dev.wiggle.proto.v1.ReleaseTaskRequest;
import dev.wiggle.proto.v1.Task;
import dev.wiggle.proto.v1.TaskReportResponse;
import io.grpc.Status;
import java.lang.System.Logger.Level;

/**
 * Runs one leased task to its report: a single SERVER step (CompleteTask / FailTask), or a
 * {@link LocalRun}. Never throws: problems are logged, and the task is given back or its lease
 * left to expire, so the server redelivers it.
 */
final class TaskRunner {
  private static final System.Logger LOG = System.getLogger("dev.wiggle.worker");

  private TaskRunner() {}

  /** Starts keeping {@code task}'s lease alive; done on receipt, before it waits for a thread. */
  static Lease hold(Env env, Task task, long receivedNanos) {
    env.rpc.noteRequestLimit(task.getMaxRequestBytes()); // no report batch is built larger
    Lease l = new Lease(task.getTaskId(), task.getLease(), task.getNodeId(), task.getTimeoutMs());
    l.renewed(task.getLeaseExpiresAtMs(), task.getServerNowMs(), receivedNanos, 0);
    env.keeper.hold(l);
    return l;
  }

  /** Runs {@code task}, then any next task its report brought back (SERVER mode). */
  static void run(Env env, Task task, Lease lease) {
    Task next = task;
    while (next != null) {
      Task t = next;
      next = null;
      try {
        if (env.stopping()) {
          // Received (a next task, or queued for a thread) but not started before the drain.
          release(env, t, lease, "shutdown");
          continue;
        }
        Graph g = localGraph(env, t);
        if (g != null) {
          new LocalRun(env, t, g, lease).run();
        } else {
          next = serverStep(env, t, lease);
        }
      } catch (RuntimeException e) {
        LOG.log(Level.ERROR, "task " + t.getTaskId() + " (" + t.getFlow() + "/" + t.getNodeId()
            + ") crashed in the worker", e);
        release(env, t, lease, "worker error: " + e.getClass().getSimpleName());
      } finally {
        env.keeper.drop(lease);
      }
      if (next != null) {
        lease = hold(env, next, System.nanoTime());
      }
    }
  }

  /** The graph to chain on, or null to run the task as one SERVER step. */
  private static Graph localGraph(Env env, Task t) {
    ExecutionMode mode = mode(t);
    if (mode == ExecutionMode.SERVER || env.advanceRun.get() < 0) {
      return null;
    }
    Graph g = env.definitions.get(t.getFlow(), t.getVersion());
    if (g == null) {
      return null;
    }
    Node n = g.node(t.getNodeId());
    if (n == null || !n.isWorkerStep()) {
      LOG.log(Level.WARNING, "task " + t.getTaskId() + " is at node '" + t.getNodeId()
          + "', which a worker does not run; running it as a SERVER step");
      return null;
    }
    return g;
  }

  static ExecutionMode mode(Task t) {
    return switch (t.getExecutionMode()) {
      case LOCAL_SYNC -> ExecutionMode.LOCAL_SYNC;
      case LOCAL_ASYNC -> ExecutionMode.LOCAL_ASYNC;
      default -> ExecutionMode.SERVER;
    };
  }

  static StepInfo info(Task t, String nodeId, String activity, int attempt, ExecutionMode mode,
      Lease lease) {
    return new StepInfo(t.getInstanceId(), nodeId, attempt, t.getFlow(), t.getVersion(), activity,
        mode, t.getTaskId(), lease.cancelled);
  }

  /**
   * SERVER mode: run the one step, then report it. Without the graph the worker cannot tell a
   * predicate from a task; a predicate's boolean goes as JSON true / false, which is exactly what
   * CompleteTask expects of one.
   */
  private static Task serverStep(Env env, Task t, Lease lease) {
    StepInfo info = info(t, t.getNodeId(), t.getActivity(), t.getAttempt(), ExecutionMode.SERVER, lease);
    java.util.function.Supplier<Outcome> call = () -> Handlers.run(
        env.registry.get(t.getActivity()), t.getActivity(), t.getInput().toByteArray(), info,
        false, t.getMaxPayloadBytes(), lease);
    Outcome out = env.spans == null ? call.get() : env.spans.run(t, new StepSpans.Step(
        t.getNodeId(), t.getActivity(), t.getAttempt(), ExecutionMode.SERVER.name(),
        LocalRun.loopCounts(t), 0, ""), call);
    if (env.aborted) {
      // The drain gave up while the step ran (its handler was interrupted): give it back.
      release(env, t, lease, "shutdown");
      return null;
    }
    return reportSingle(env, t, lease, out, true);
  }

  /**
   * CompleteTask or FailTask for one step; the instance's next task when CompleteTask was asked
   * for it ({@code wantNext}, not while draining) and leased it to this worker.
   */
  static Task reportSingle(Env env, Task t, Lease lease, Outcome out, boolean wantNext) {
    if (lease.lost()) {
      LOG.log(Level.INFO, "task " + t.getTaskId() + " dropped: " + lease.lostWhy());
      return null;
    }
    long seq = lease.reportSeq();
    long retryFor = retryWindow(lease);
    try {
      if (out.failure() != null) {
        env.rpc.call(WiggleRpc.FAIL_TASK, FailTaskRequest.newBuilder()
            .setTaskId(t.getTaskId()).setLease(t.getLease()).setFailure(out.failure().proto())
            .setSeq(seq).build(), 0, retryFor);
        lease.applied(seq);
        return null;
      }
      CompleteTaskRequest.Builder req = CompleteTaskRequest.newBuilder()
          .setTaskId(t.getTaskId()).setLease(t.getLease())
          .setResult(ByteString.copyFrom(out.serverResult())).setSeq(seq);
      boolean ask = wantNext && !env.stopping();
      if (ask) {
        req.setNext(EagerDispatch.newBuilder().setWorkerId(env.workerId)
            .addAllQueues(env.queues).addAllActivities(env.registry.names()));
      }
      TaskReportResponse r = env.rpc.call(WiggleRpc.COMPLETE_TASK, req.build(), 0, retryFor);
      lease.applied(seq);
      return ask && r.hasNextTask() ? r.getNextTask() : null;
    } catch (RpcException e) {
      refused(env, t, lease, "report of task " + t.getTaskId(), e);
      return null;
    }
  }

  /**
   * A report the server did not apply: the lease is lost (stop), its fate is unknown after
   * resending for as long as the lease lasted (the lease has run out: nothing to do), or it was
   * refused for good (give the task back at once, under the refused report's seq, so the step
   * is redelivered now rather than when the lease expires).
   */
  static void refused(Env env, Task t, Lease lease, String what, RpcException e) {
    if (e.gone()) {
      lease.lose(e.getMessage());
      LOG.log(Level.INFO, what + " refused, the lease is lost: " + e.getMessage());
      return;
    }
    if (e.retryable() || e.code() == Status.Code.CANCELLED) {
      LOG.log(Level.WARNING, what + " unanswered; its lease is left to expire: " + e.getMessage());
      return;
    }
    LOG.log(Level.ERROR, what + " refused: " + e.getMessage());
    release(env, t, lease, "report refused: " + e.code());
  }

  /**
   * How long a report is resent while unanswered: past the lease's end the task belongs to
   * someone else, and the report would be refused.
   */
  static long retryWindow(Lease lease) {
    return Math.max(1_000, lease.remainingMs());
  }

  /**
   * Gives a leased task back without running (more of) it: READY again at the same node with the
   * same attempt. False when the server did not take it (an older server without ReleaseTask, or
   * the lease is gone): the lease then expires and the server redelivers.
   */
  static boolean release(Env env, Task t, Lease lease, String reason) {
    if (lease.lost()) {
      return false;
    }
    long seq = lease.reportSeq();
    try {
      env.rpc.call(WiggleRpc.RELEASE_TASK, ReleaseTaskRequest.newBuilder()
          .setTaskId(t.getTaskId()).setLease(t.getLease()).setSeq(seq).setReason(reason).build(),
          5_000, env.aborted ? 0 : retryWindow(lease));
      lease.applied(seq);
      return true;
    } catch (RpcException e) {
      LOG.log(e.code() == Status.Code.UNIMPLEMENTED || e.gone() ? Level.INFO : Level.WARNING,
          "release of task " + t.getTaskId() + " refused; its lease is left to expire: "
              + e.getMessage());
      return false;
    }
  }
}
