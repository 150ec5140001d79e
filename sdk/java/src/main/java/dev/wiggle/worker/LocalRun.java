package dev.wiggle.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.CodedOutputStream;
import dev.wiggle.graph.ExecutionMode;
import dev.wiggle.graph.Graph;
import dev.wiggle.graph.Kind;
import dev.wiggle.graph.Node;
import dev.wiggle.proto.v1.AdvanceRunRequest;
import dev.wiggle.proto.v1.AdvanceRunResponse;
import dev.wiggle.proto.v1.InstanceStatus;
import dev.wiggle.proto.v1.StepResult;
import dev.wiggle.proto.v1.Task;
import dev.wiggle.traversal.Handback;
import dev.wiggle.traversal.Move;
import dev.wiggle.traversal.Traversal;
import io.grpc.Status;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One local run, from a leased task to its handback.
 *
 * <p>It starts at the leased node and keeps running nodes itself while the handback rule ({@link
 * Traversal}) says the next node is a step this worker may run, reporting through AdvanceRun:
 * after every step in LOCAL_SYNC; in LOCAL_ASYNC at the handback, right after a checkpoint step,
 * when {@code localBatchSize} results are buffered, and before a result would push the request
 * over the server's {@code max_request_bytes}. Between steps it checks whether the worker is
 * draining (hand back with reason {@code shutdown}, flushing the buffer), whether the lease was
 * lost (abandon: the server would refuse the results anyway) and whether enough lease is left.
 *
 * <p>A {@code condition} or {@code set} node after a worker step is evaluated on the spot
 * ({@link ExpressionNodes}) and its result buffered with that step: it is never a handback, never
 * flushed alone, and the batch size counts worker steps only.
 *
 * <p>What a crash costs follows from when results reach the server: one step in LOCAL_SYNC,
 * everything buffered since the last flush in LOCAL_ASYNC.
 */
final class LocalRun {
  private static final System.Logger LOG = System.getLogger("dev.wiggle.worker");
  /** Room left under {@code max_request_bytes} for the fields that change between calls. */
  private static final int REQUEST_MARGIN = 1_024;

  private final Env env;
  private final Task task;
  private final Graph g;
  private final Lease lease;
  private final ExecutionMode mode;
  private final long maxRequestBytes;
  private final List<StepResult> buffer = new ArrayList<>();
  private long bufferBytes; // the encoded size of the buffered steps as AdvanceRun fields
  private int workerSteps; // the buffered results of worker steps (the batch size counts these)
  /** The {@code instance} variable of the run's expressions: {"id": ..., "flow": ...}. */
  private final Map<String, Object> instance;
  private int flushes;
  /** Why the run ended, for logs and tests. */
  String handback;

  LocalRun(Env env, Task task, Graph g, Lease lease) {
    this.env = env;
    this.task = task;
    this.g = g;
    this.lease = lease;
    this.mode = TaskRunner.mode(task);
    this.maxRequestBytes = Limits.request(task.getMaxRequestBytes(), task.getMaxPayloadBytes());
    this.instance = Map.of("id", task.getInstanceId(), "flow", task.getFlow());
  }

  void run() {
    String nodeId = task.getNodeId();
    String activity = task.getActivity();
    int attempt = task.getAttempt();
    byte[] input = task.getInput().toByteArray();
    Map<String, Integer> loopCounts = loopCounts();
    int position = 0; // the step's place in the run, and the span before it (tracing)
    String previous = "";
    while (true) {
      Node node = g.node(nodeId);
      boolean isPredicate = node.kind() == Kind.PREDICATE;
      lease.running(nodeId, node.timeoutMs());
      StepInfo info = TaskRunner.info(task, nodeId, activity, attempt, mode, lease);
      Outcome out;
      if (env.spans == null) {
        out = Handlers.run(env.registry.get(activity), activity, input, info, isPredicate,
            task.getMaxPayloadBytes(), lease);
      } else {
        String act = activity;
        byte[] in = input;
        out = env.spans.run(task, new StepSpans.Step(nodeId, activity, attempt, mode.name(),
            loopCounts, position, previous), () -> Handlers.run(env.registry.get(act), act, in,
                info, isPredicate, task.getMaxPayloadBytes(), lease));
        previous = TraceIds.stepSpanId(task.getInstanceId(), task.getTaskId(), nodeId, attempt,
            loopCounts);
        position++;
      }
      if (env.aborted || lease.lost()) {
        // The handler was interrupted (the drain gave up) or its result would be refused.
        abandon(env.aborted ? "aborted" : Handback.NOT_RUNNING.wire());
        return;
      }
      StepResult step = out.toStep(nodeId);
      int size = CodedOutputStream.computeMessageSize(AdvanceRunRequest.STEPS_FIELD_NUMBER, step);
      if (!buffer.isEmpty() && requestSize(size) > maxRequestBytes - REQUEST_MARGIN) {
        // Send what is buffered first: the token moves to this node, whose result starts the
        // next batch.
        AdvanceRunResponse r = flush(false, "", node);
        if (r == null || !r.getKeepGoing()) {
          return;
        }
      }
      buffer.add(step);
      bufferBytes += size;
      workerSteps++;
      if (out.failure() != null || (isPredicate && out.predicate() == null)) {
        // A failure goes with the successful prefix, so the server applies both and then the
        // retry policy in one transaction. A predicate's non-boolean result goes as it is, so
        // the server fails the step as it does for a SERVER-mode CompleteTask.
        finish(Handback.STEP_FAILED);
        return;
      }
      Move move = Traversal.advance(g, nodeId, env.queues, out.predicate(), loopCounts);
      if (!isPredicate) {
        input = out.context(); // a predicate leaves the context as it was
      }
      // Expression nodes are evaluated here and travel with the worker step before them: never
      // flushed alone, never a reason to hand back (docs/worker-protocol.md, "Expression nodes
      // in a run").
      JsonNode ctx = null;
      while (move.handback() == null && g.node(move.next()).isExpression()) {
        Node expr = g.node(move.next());
        if (ctx == null) {
          ctx = context(input);
        }
        ExpressionNodes.Result value = ExpressionNodes.evaluate(expr, ctx, instance,
            task.getMaxPayloadBytes());
        StepResult result = value.outcome().toStep(expr.id());
        buffer.add(result);
        bufferBytes +=
            CodedOutputStream.computeMessageSize(AdvanceRunRequest.STEPS_FIELD_NUMBER, result);
        if (value.outcome().failure() != null) {
          finish(Handback.STEP_FAILED);
          return;
        }
        if (value.outcome().predicate() == null) {
          input = value.outcome().context();
          ctx = value.context();
        }
        move = Traversal.advance(g, expr.id(), env.queues, value.outcome().predicate(),
            move.loopCounts());
      }
      if (move.handback() != null) {
        finish(move.handback());
        return;
      }
      Node next = g.node(move.next());
      if (lease.over()) {
        abandon(Handback.NOT_RUNNING.wire()); // lost, or expired on our clock: no report
        return;
      }
      Handback why = betweenSteps(next);
      if (why != null) {
        finish(why);
        return;
      }
      if (mustFlush(node)) {
        AdvanceRunResponse r = flush(false, "", next);
        if (r == null || !r.getKeepGoing()) {
          return;
        }
      }
      nodeId = next.id();
      activity = next.activity();
      attempt = 1;
      loopCounts = move.loopCounts();
    }
  }

  /** The context an expression node receives, as a tree; an unreadable one is JSON null. */
  private JsonNode context(byte[] json) {
    try {
      return Json.parse(json);
    } catch (IOException e) {
      LOG.log(Level.WARNING, "task " + task.getTaskId() + ": the context is not JSON: "
          + e.getMessage());
      return com.fasterxml.jackson.databind.node.NullNode.getInstance();
    }
  }

  private Map<String, Integer> loopCounts() {
    return loopCounts(task);
  }

  /** A task's loop counts (empty when unreadable, with a warning). */
  static Map<String, Integer> loopCounts(Task task) {
    Map<String, Integer> counts = new HashMap<>();
    if (task.getLoopCounts().isEmpty()) {
      return counts;
    }
    try {
      JsonNode doc = Json.parse(task.getLoopCounts().toByteArray());
      doc.fields().forEachRemaining(e -> counts.put(e.getKey(), e.getValue().asInt()));
    } catch (IOException e) {
      LOG.log(Level.WARNING, "task " + task.getTaskId() + " has unreadable loop counts; "
          + "treating them as empty: " + e.getMessage());
    }
    return counts;
  }

  /** The encoded size of the next AdvanceRun if a step of {@code stepSize} joined the buffer. */
  private long requestSize(int stepSize) {
    int fields = AdvanceRunRequest.newBuilder().setTaskId(task.getTaskId())
        .setLease(task.getLease()).setSeq(lease.reportSeq()).build().getSerializedSize();
    return fields + bufferBytes + stepSize;
  }

  /**
   * Why to hand back before starting {@code next}, or null: a drain, a spent lease budget, an
   * activity this worker does not have.
   */
  private Handback betweenSteps(Node next) {
    if (env.draining) {
      return Handback.SHUTDOWN;
    }
    // A step longer than the lease was last renewed for: renew by its timeout first, so the
    // budget is measured against the lease it will run under.
    if (next.timeoutMs() > lease.lengthMs()) {
      lease.running(next.id(), next.timeoutMs());
      env.keeper.beat(lease);
      if (lease.over()) {
        return Handback.LEASE_BUDGET;
      }
    }
    if (!Traversal.leaseBudgetLeft(lease.remainingMs(), lease.lengthMs())) {
      return Handback.LEASE_BUDGET;
    }
    if (env.registry.get(next.activity()) == null) {
      return Handback.UNKNOWN_ACTIVITY;
    }
    return null;
  }

  private boolean mustFlush(Node node) {
    return mode == ExecutionMode.LOCAL_SYNC
        || (node.kind() == Kind.TASK && node.checkpoint())
        || workerSteps >= env.localBatchSize; // expression results do not count
  }

  private void finish(Handback reason) {
    handback = reason.wire();
    flush(true, reason.wire(), null);
  }

  /** Ends the run without reporting; gives the task back when its lease may still be ours. */
  private void abandon(String why) {
    handback = why;
    if (env.aborted) {
      TaskRunner.release(env, task, lease, "shutdown");
    } else {
      LOG.log(Level.INFO, "local run of task " + task.getTaskId() + " abandoned: "
          + (lease.lost() ? lease.lostWhy() : "the lease expired"));
    }
  }

  /**
   * Sends the buffer; null when the run must stop (refused, not RUNNING, fallen back).
   * {@code next}: where a non-final flush moves the token (its timeout is the new lease length).
   */
  private AdvanceRunResponse flush(boolean fin, String reason, Node next) {
    if (env.advanceRun.get() < 0 && flushes == 0) {
      fallBack(); // another run found out meanwhile that the server has no AdvanceRun
      return null;
    }
    long seq = lease.reportSeq();
    AdvanceRunRequest req = AdvanceRunRequest.newBuilder()
        .setTaskId(task.getTaskId()).setLease(task.getLease()).addAllSteps(buffer)
        .setFinal(fin).setHandbackReason(reason).setSeq(seq).build();
    AdvanceRunResponse r;
    try {
      r = env.rpc.call(WiggleRpc.ADVANCE_RUN, req, 0, TaskRunner.retryWindow(lease));
    } catch (RpcException e) {
      refused(e);
      return null;
    }
    long received = System.nanoTime();
    lease.applied(seq);
    flushes++;
    buffer.clear();
    bufferBytes = 0;
    workerSteps = 0;
    env.advanceRun.set(1);
    if (r.getInstanceStatus() != InstanceStatus.RUNNING) {
      if (handback == null) {
        handback = Handback.NOT_RUNNING.wire();
      }
      return null;
    }
    if (!fin) {
      // The server moved the token on and leased it for the next node's timeout.
      lease.renewed(r.getLeaseExpiresAtMs(), r.getServerNowMs(), received, next.timeoutMs());
    }
    return r;
  }

  private void refused(RpcException e) {
    if (e.code() == Status.Code.UNIMPLEMENTED && flushes == 0) {
      // An older server: report the first step the SERVER way, and stop trying local runs.
      if (env.advanceRun.getAndSet(-1) != -1) { // say it once, not per run
        LOG.log(Level.WARNING, "server does not implement AdvanceRun; running tasks in SERVER mode");
      }
      fallBack();
      return;
    }
    if (handback == null) {
      handback = "refused";
    }
    TaskRunner.refused(env, task, lease, "AdvanceRun for task " + task.getTaskId(), e);
  }

  /**
   * Reports the first buffered step with CompleteTask / FailTask, as in SERVER mode, and drops
   * the rest: those steps run again as SERVER tasks (at-least-once allows it).
   */
  private void fallBack() {
    Outcome out = Outcome.of(buffer.get(0));
    buffer.clear();
    bufferBytes = 0;
    handback = "fallback";
    TaskRunner.reportSingle(env, task, lease, out, false);
  }
}
