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
 * {@link LocalRun}. Never throws: problems are logged, and the lease then expires and the server
 * redelivers the task.
 */
final class TaskRunner {
  private static final System.Logger LOG = System.getLogger("dev.wiggle.worker");

  private TaskRunner() {}

  /** Starts keeping {@code task}'s lease alive; done on receipt, before the task waits for a thread. */
  static Lease hold(Env env, Task task, long receivedNanos) {
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
        Graph g = localGraph(env, t);
        if (g != null) {
          new LocalRun(env, t, g, lease).run();
        } else {
          next = serverStep(env, t, lease);
        }
      } catch (RuntimeException e) {
        LOG.log(Level.ERROR, "task " + t.getTaskId() + " (" + t.getFlow() + "/" + t.getNodeId()
            + ") crashed in the worker", e);
      } finally {
        env.keeper.drop(lease);
      }
      if (next != null) {
        lease = hold(env, next, System.nanoTime());
        // Race: the worker began draining while the report that brought this task was in flight.
        if (env.stopping() && release(env, next, lease, "shutdown") != Released.UNSUPPORTED) {
          env.keeper.drop(lease);
          next = null;
        }
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
    Outcome out = Handlers.run(env.registry.get(t.getActivity()), t.getActivity(),
        t.getInput().toByteArray(), info, false, t.getMaxPayloadBytes(), lease);
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
    long retryFor = retryWindow(lease);
    try {
      if (out.failure() != null) {
        env.rpc.call(WiggleRpc.FAIL_TASK, FailTaskRequest.newBuilder()
            .setTaskId(t.getTaskId()).setLease(t.getLease()).setFailure(out.failure().proto())
            .setSeq(lease.nextSeq()).build(), 0, retryFor);
        return null;
      }
      CompleteTaskRequest.Builder req = CompleteTaskRequest.newBuilder()
          .setTaskId(t.getTaskId()).setLease(t.getLease())
          .setResult(ByteString.copyFrom(out.serverResult())).setSeq(lease.nextSeq());
      boolean ask = wantNext && !env.stopping();
      if (ask) {
        req.setNext(EagerDispatch.newBuilder().setWorkerId(env.workerId)
            .addAllQueues(env.queues).addAllActivities(env.registry.names()));
      }
      TaskReportResponse r = env.rpc.call(WiggleRpc.COMPLETE_TASK, req.build(), 0, retryFor);
      return ask && r.hasNextTask() ? r.getNextTask() : null;
    } catch (RpcException e) {
      refused("report of task " + t.getTaskId(), e);
      return null;
    }
  }

  static void refused(String what, RpcException e) {
    LOG.log(e.gone() ? Level.INFO : Level.ERROR, what + " refused: " + e.getMessage());
  }

  /**
   * How long a report is retried while the server is unreachable: past the lease's end the task
   * belongs to someone else, and the report would be refused.
   */
  static long retryWindow(Lease lease) {
    return Math.max(1_000, lease.remainingMs());
  }

  enum Released { YES, REFUSED, UNSUPPORTED }

  /**
   * Gives a leased task back without running (more of) it: READY again at the same node with the
   * same attempt. UNSUPPORTED: the server predates ReleaseTask; the caller runs the task instead.
   */
  static Released release(Env env, Task t, Lease lease, String reason) {
    long seq = lease.nextSeq();
    try {
      env.rpc.call(WiggleRpc.RELEASE_TASK, ReleaseTaskRequest.newBuilder()
          .setTaskId(t.getTaskId()).setLease(t.getLease()).setSeq(seq).setReason(reason).build(),
          5_000, 0);
      return Released.YES;
    } catch (RpcException e) {
      if (e.code() == Status.Code.UNIMPLEMENTED) {
        lease.unsent(seq);
        return Released.UNSUPPORTED;
      }
      refused("release of task " + t.getTaskId(), e);
      return Released.REFUSED;
    }
  }
}
