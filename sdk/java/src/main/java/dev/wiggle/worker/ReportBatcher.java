package dev.wiggle.worker;

import com.google.protobuf.CodedOutputStream;
import dev.wiggle.proto.v1.ReportBatchRequest;
import dev.wiggle.proto.v1.ReportBatchResponse;
import dev.wiggle.proto.v1.TaskReport;
import dev.wiggle.proto.v1.TaskReportAnswer;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.Deadline;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import java.lang.System.Logger.Level;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Reports of concurrent tasks sent together: one {@code ReportBatch} call carries many
 * (docs/worker-protocol.md, "Batched reports").
 *
 * <p>Most of a report's cost, on both sides, is the call itself. So one batch is in flight at a
 * time, and the reports made meanwhile go together in the next. A report made while none is in
 * flight is sent at once: batching never delays a lone report, it only groups the ones that
 * would otherwise each wait for a round trip. There is no timer.
 *
 * <p>Each caller gets exactly what its report's own RPC would have given it, the response or a
 * {@link StatusRuntimeException} with that RPC's status and {@code wiggle-error-code}, so the
 * retry loop of {@link Rpc} (a resend keeps its seq) and the handling of refusals do not know
 * batching exists. A server without ReportBatch (UNIMPLEMENTED) turns batching off for good:
 * each report goes alone again. Two reports of one lease never meet in a batch, since a lease's
 * next report is made only after the previous one was answered.
 */
final class ReportBatcher {
  private static final System.Logger LOG = System.getLogger("dev.wiggle.worker");
  /** A batch is split before it would exceed this, or the server's smaller request limit. */
  static final long MAX_BATCH_BYTES = 4L * 1024 * 1024;
  /** The most reports in one batch. */
  static final int MAX_BATCH_REPORTS = 256;

  private final Channel channel;
  // One thread at most, and only while there is something to send: batches go one at a time.
  private final ThreadPoolExecutor sender = new ThreadPoolExecutor(1, 1, 30, TimeUnit.SECONDS,
      new LinkedBlockingQueue<>(), Threads.named("wiggle-reports"));
  private final ArrayDeque<Pending> queue = new ArrayDeque<>(); // guarded by this
  private boolean sending; // guarded by this
  private volatile boolean enabled = true;
  private final AtomicLong maxBytes = new AtomicLong(MAX_BATCH_BYTES);
  /** ReportBatch calls made (for tests). */
  final AtomicLong calls = new AtomicLong();

  ReportBatcher(Channel channel) {
    this.channel = channel;
    sender.allowCoreThreadTimeOut(true);
  }

  /** The server's request limit, as a task carried it: no batch is built larger. */
  void noteLimit(long maxRequestBytes) {
    maxBytes.accumulateAndGet(maxRequestBytes, (cur, lim) -> lim > 0 && lim < cur ? lim : cur);
  }

  /**
   * One unary call: a report goes in the next batch and its caller waits for its own answer;
   * every other call (and every report once the server has no ReportBatch) goes alone.
   */
  <Q, R> R call(MethodDescriptor<Q, R> method, Q request, CallOptions options) {
    ReportKind kind = ReportKind.of(method);
    if (kind == null || !enabled) {
      return ClientCalls.blockingUnaryCall(channel, method, options, request);
    }
    Pending p = new Pending(kind.wrap(request), options.getDeadline());
    synchronized (this) {
      queue.add(p);
      notifyAll(); // a test waiting in awaitQueued
      if (!sending) {
        sending = true;
        sender.execute(this::pump);
      }
    }
    TaskReportAnswer answer;
    try {
      answer = p.await();
    } catch (Unbatched u) {
      return ClientCalls.blockingUnaryCall(channel, method, options, request);
    }
    @SuppressWarnings("unchecked")
    R response = (R) kind.unpack(answer);
    return response;
  }

  /** No batch is built larger than this (a lone report goes whatever its size). */
  long maxBytes() {
    return maxBytes.get();
  }

  /**
   * Waits until at least {@code n} reports wait behind the batch in flight, or {@code timeoutMs}
   * passes; returns how many wait (for tests: woken by each report queued, no polling).
   */
  synchronized int awaitQueued(int n, long timeoutMs) throws InterruptedException {
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    while (queue.size() < n) {
      long left = end - System.nanoTime();
      if (left <= 0) {
        break;
      }
      TimeUnit.NANOSECONDS.timedWait(this, left);
    }
    return queue.size();
  }

  /** Sends what is queued, one batch at a time, until nothing is. */
  private void pump() {
    while (true) {
      List<Pending> items = new ArrayList<>();
      synchronized (this) {
        while (!queue.isEmpty() && items.size() < MAX_BATCH_REPORTS) {
          Pending p = queue.poll();
          if (!p.done.isDone()) { // its caller gave up waiting: its resend comes on its own
            items.add(p);
          }
        }
        if (items.isEmpty()) {
          sending = false;
          return;
        }
      }
      try {
        for (List<Pending> chunk : chunks(items, maxBytes.get())) {
          send(chunk);
        }
      } catch (RuntimeException e) {
        // A bug of ours: no report may be left waiting for an answer that never comes.
        StatusRuntimeException err = Status.INTERNAL
            .withDescription("ReportBatch not sent: " + e).withCause(e).asRuntimeException();
        items.forEach(p -> p.done.completeExceptionally(err));
      }
    }
  }

  /** One ReportBatch call; every report in it gets its own answer. */
  private void send(List<Pending> items) {
    List<Pending> live = items.stream().filter(p -> !p.done.isDone()).toList();
    if (live.isEmpty()) {
      return;
    }
    if (!enabled) { // an earlier batch found no ReportBatch
      live.forEach(p -> p.done.completeExceptionally(new Unbatched()));
      return;
    }
    ReportBatchRequest.Builder req = ReportBatchRequest.newBuilder();
    Deadline deadline = null; // the earliest of its callers'
    for (Pending p : live) {
      req.addReports(p.report);
      if (p.deadline != null && (deadline == null || p.deadline.isBefore(deadline))) {
        deadline = p.deadline;
      }
    }
    ReportBatchResponse resp;
    try {
      calls.incrementAndGet();
      resp = ClientCalls.blockingUnaryCall(channel, WiggleRpc.REPORT_BATCH,
          CallOptions.DEFAULT.withDeadline(deadline), req.build());
    } catch (StatusRuntimeException e) {
      Status.Code code = e.getStatus().getCode();
      if (code == Status.Code.RESOURCE_EXHAUSTED && live.size() > 1) {
        // Too big together (the limit was not known yet): one report's size must not spoil
        // the others; each goes alone in a batch of its own and gets its own answer.
        live.forEach(p -> send(List.of(p)));
      } else if (code == Status.Code.UNIMPLEMENTED) {
        if (enabled) {
          enabled = false;
          LOG.log(Level.INFO, "the server does not implement ReportBatch; reporting one call each");
        }
        live.forEach(p -> p.done.completeExceptionally(new Unbatched()));
      } else {
        // The call as a whole failed (transport, deadline, authentication): every report in it
        // gets that answer, and one of unknown fate is resent by its caller, same seq.
        live.forEach(p -> p.done.completeExceptionally(
            new StatusRuntimeException(e.getStatus(), e.getTrailers())));
      }
      return;
    }
    if (resp.getAnswersCount() != live.size()) {
      StatusRuntimeException broken = Status.INTERNAL.withDescription("ReportBatch answered "
          + resp.getAnswersCount() + " reports for " + live.size() + " sent").asRuntimeException();
      live.forEach(p -> p.done.completeExceptionally(broken));
      return;
    }
    for (int i = 0; i < live.size(); i++) {
      live.get(i).done.complete(resp.getAnswers(i));
    }
  }

  /** {@code items} split so that no ReportBatch request exceeds {@code maxBytes}. */
  static List<List<Pending>> chunks(List<Pending> items, long maxBytes) {
    List<List<Pending>> out = new ArrayList<>();
    List<Pending> chunk = new ArrayList<>();
    long size = 0;
    for (Pending p : items) {
      // A TaskReport inside the request: a tag and a length around it (a lone one is not
      // measured against the limit: it travels alone whatever its size).
      int body = p.report.getSerializedSize();
      long weight = 1 + CodedOutputStream.computeUInt32SizeNoTag(body) + (long) body;
      if (!chunk.isEmpty() && size + weight > maxBytes) {
        out.add(chunk);
        chunk = new ArrayList<>();
        size = 0;
      }
      chunk.add(p);
      size += weight;
    }
    if (!chunk.isEmpty()) {
      out.add(chunk);
    }
    return out;
  }

  /** One report waiting for its answer. */
  static final class Pending {
    final TaskReport report;
    final Deadline deadline; // null: none
    final CompletableFuture<TaskReportAnswer> done = new CompletableFuture<>();

    Pending(TaskReport report, Deadline deadline) {
      this.report = report;
      this.deadline = deadline;
    }

    /**
     * Its answer, or the error its own call would have thrown. A caller whose deadline passes or
     * who is interrupted stops waiting as a blocking call would (DEADLINE_EXCEEDED, CANCELLED):
     * the report may still be applied, and the caller's resend under the same seq settles it.
     */
    TaskReportAnswer await() {
      try {
        if (deadline == null) {
          done.get();
        } else {
          done.get(Math.max(0, deadline.timeRemaining(TimeUnit.NANOSECONDS)), TimeUnit.NANOSECONDS);
        }
      } catch (TimeoutException e) {
        done.completeExceptionally(Status.DEADLINE_EXCEEDED
            .withDescription("no ReportBatch answer within the report's deadline").asRuntimeException());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        done.completeExceptionally(Status.CANCELLED.withDescription("interrupted")
            .withCause(e).asRuntimeException());
      } catch (ExecutionException e) {
        // read below
      }
      // Whichever came first, the answer or the caller giving up, is the outcome.
      try {
        return done.getNow(null);
      } catch (java.util.concurrent.CompletionException e) {
        Throwable cause = e.getCause();
        if (cause instanceof Unbatched u) {
          throw u;
        }
        if (cause instanceof StatusRuntimeException s) {
          throw new StatusRuntimeException(s.getStatus(), s.getTrailers());
        }
        throw Status.INTERNAL.withCause(cause).asRuntimeException();
      }
    }
  }

  /** The server has no ReportBatch: the caller sends its report with its own RPC. */
  static final class Unbatched extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Unbatched() {
      super("ReportBatch unimplemented", null, false, false);
    }
  }
}
