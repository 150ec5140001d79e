package dev.wiggle.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.IntNode;
import com.google.protobuf.ByteString;
import dev.wiggle.proto.v1.AdvanceRunRequest;
import dev.wiggle.proto.v1.AdvanceRunResponse;
import dev.wiggle.proto.v1.CompleteTaskRequest;
import dev.wiggle.proto.v1.EndPollsResponse;
import dev.wiggle.proto.v1.ExecutionMode;
import dev.wiggle.proto.v1.PollTasksResponse;
import dev.wiggle.proto.v1.ReportBatchRequest;
import dev.wiggle.proto.v1.ReportBatchResponse;
import dev.wiggle.proto.v1.ReportError;
import dev.wiggle.proto.v1.Task;
import dev.wiggle.proto.v1.TaskReport;
import dev.wiggle.proto.v1.TaskReportAnswer;
import dev.wiggle.proto.v1.TaskReportResponse;
import io.grpc.CallOptions;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Reports sent together in ReportBatch calls, against an in-process fake server. */
class ReportBatcherTest {
  private FakeServer fake;
  private final ExecutorService callers = Executors.newCachedThreadPool();

  @BeforeEach
  void setUp() throws Exception {
    fake = new FakeServer();
  }

  @AfterEach
  void tearDown() {
    callers.shutdownNow();
    fake.close();
  }

  private static CompleteTaskRequest complete(String task) {
    return CompleteTaskRequest.newBuilder().setTaskId(task).setLease("L-" + task).setSeq(1)
        .setResult(ByteString.copyFromUtf8("7")).build();
  }

  /** A ReportBatch handler that answers every report of a batch with {@code answer}. */
  private static Function<ReportBatchRequest, ReportBatchResponse> each(
      Function<TaskReport, TaskReportAnswer> answer) {
    return req -> {
      ReportBatchResponse.Builder r = ReportBatchResponse.newBuilder();
      req.getReportsList().forEach(rep -> r.addAnswers(answer.apply(rep)));
      return r.build();
    };
  }

  private void answerEach(Function<TaskReport, TaskReportAnswer> answer) {
    fake.on(WiggleRpc.REPORT_BATCH, each(answer));
  }

  /**
   * The fake's ReportBatch, holding its first call until {@link #letGo}: what the worker reports
   * meanwhile queues behind it, so which reports share a batch is certain, not a race.
   */
  private final class FirstBatchHeld {
    final CountDownLatch first = new CountDownLatch(1);
    final CountDownLatch letGo = new CountDownLatch(1);
    private final AtomicInteger calls = new AtomicInteger();

    FirstBatchHeld(Function<ReportBatchRequest, ReportBatchResponse> answer) {
      fake.on(WiggleRpc.REPORT_BATCH, req -> {
        if (calls.incrementAndGet() == 1) {
          first.countDown();
          await(letGo);
        }
        return answer.apply(req);
      });
    }
  }

  /** A CompleteTask's answer that names its task, so each caller can tell its own. */
  private static TaskReportAnswer named(TaskReport rep) {
    return TaskReportAnswer.newBuilder().setTask(TaskReportResponse.newBuilder()
        .setNextTask(Task.newBuilder().setTaskId("after-" + rep.getComplete().getTaskId()))).build();
  }

  private static List<List<String>> batches(FakeServer fake) {
    List<List<String>> out = new ArrayList<>();
    for (ReportBatchRequest b : fake.sent(ReportBatchRequest.class)) {
      out.add(b.getReportsList().stream().map(r -> r.getComplete().getTaskId()).toList());
    }
    return out;
  }

  private static CallOptions inTenSeconds() {
    return CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS);
  }

  private Future<TaskReportResponse> report(ReportBatcher b, String task) {
    return callers.submit(() -> b.call(WiggleRpc.COMPLETE_TASK, complete(task), inTenSeconds()));
  }

  /** Waits until {@code n} reports queue behind the batch in flight (no timing is asserted). */
  private static void awaitQueued(ReportBatcher b, int n) throws InterruptedException {
    assertEquals(n, b.awaitQueued(n, 10_000));
  }

  @Test
  void aLoneReportGoesAtOnceInABatchOfItsOwnAndGetsItsOwnAnswer() {
    answerEach(ReportBatcherTest::named);
    ReportBatcher b = new ReportBatcher(fake.channel);
    TaskReportResponse r = b.call(WiggleRpc.COMPLETE_TASK, complete("t1"), inTenSeconds());
    assertEquals("after-t1", r.getNextTask().getTaskId()); // the next task handed back is kept
    assertEquals(List.of(List.of("t1")), batches(fake));
    assertEquals(1, b.calls.get());
    assertTrue(fake.sent(CompleteTaskRequest.class).isEmpty(), "the report also went alone");
  }

  @Test
  void reportsMadeWhileABatchIsInFlightGoTogetherInTheNext() throws Exception {
    FirstBatchHeld held = new FirstBatchHeld(each(ReportBatcherTest::named));
    ReportBatcher b = new ReportBatcher(fake.channel);
    Future<TaskReportResponse> first = report(b, "a");
    assertTrue(held.first.await(10, TimeUnit.SECONDS));
    List<Future<TaskReportResponse>> rest = List.of(report(b, "b"), report(b, "c"), report(b, "d"));
    awaitQueued(b, 3);
    held.letGo.countDown();

    assertEquals("after-a", first.get(10, TimeUnit.SECONDS).getNextTask().getTaskId());
    List<String> answered = new ArrayList<>();
    for (Future<TaskReportResponse> f : rest) {
      answered.add(f.get(10, TimeUnit.SECONDS).getNextTask().getTaskId());
    }
    assertEquals(List.of("after-b", "after-c", "after-d"), answered);
    List<List<String>> sent = batches(fake);
    assertEquals(2, sent.size(), sent.toString());
    assertEquals(List.of("a"), sent.get(0));
    assertEquals(List.of("b", "c", "d"), sent.get(1).stream().sorted().toList());
  }

  @Test
  void noBatchCarriesMoreThanTheMostReports() throws Exception {
    int many = ReportBatcher.MAX_BATCH_REPORTS + 10;
    FirstBatchHeld held = new FirstBatchHeld(each(ReportBatcherTest::named));
    ReportBatcher b = new ReportBatcher(fake.channel);
    Future<TaskReportResponse> first = report(b, "first");
    assertTrue(held.first.await(10, TimeUnit.SECONDS));
    List<Future<TaskReportResponse>> rest = new ArrayList<>();
    for (int i = 0; i < many; i++) {
      rest.add(report(b, "t" + i));
    }
    awaitQueued(b, many);
    held.letGo.countDown();
    first.get(10, TimeUnit.SECONDS);
    for (Future<TaskReportResponse> f : rest) {
      f.get(10, TimeUnit.SECONDS);
    }
    List<Integer> sizes = batches(fake).stream().map(List::size).toList();
    assertEquals(List.of(1, ReportBatcher.MAX_BATCH_REPORTS, 10), sizes);
  }

  @Test
  void oneRefusedReportSpoilsNoOtherAndIsThrownAsItsOwnCallWould() throws Exception {
    FirstBatchHeld held = new FirstBatchHeld(each(rep -> rep.getComplete().getTaskId().equals("stale")
        ? TaskReportAnswer.newBuilder().setError(ReportError.newBuilder()
            .setStatusCode(Status.Code.FAILED_PRECONDITION.value()).setErrorCode("STALE_LEASE")
            .setMessage("the lease was superseded")).build()
        : named(rep)));
    ReportBatcher b = new ReportBatcher(fake.channel);
    Future<TaskReportResponse> first = report(b, "first");
    assertTrue(held.first.await(10, TimeUnit.SECONDS));
    Future<TaskReportResponse> good = report(b, "good");
    Future<StatusRuntimeException> stale = callers.submit(() -> assertThrows(
        StatusRuntimeException.class,
        () -> b.call(WiggleRpc.COMPLETE_TASK, complete("stale"), inTenSeconds())));
    awaitQueued(b, 2);
    held.letGo.countDown();
    first.get(10, TimeUnit.SECONDS);

    assertEquals("after-good", good.get(10, TimeUnit.SECONDS).getNextTask().getTaskId());
    RpcException e = RpcException.of("CompleteTask", stale.get(10, TimeUnit.SECONDS));
    assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
    assertEquals("STALE_LEASE", e.errorCode());
    assertTrue(e.gone(), "a stale lease is lost, as when CompleteTask itself refuses it");
    assertTrue(e.getMessage().contains("the lease was superseded"), e.getMessage());
    List<List<String>> sent = batches(fake);
    assertEquals(2, sent.size(), sent.toString());
    assertEquals(List.of("good", "stale"), sent.get(1).stream().sorted().toList());
  }

  @Test
  void aBatchThatFailsAsAWholeIsResentUnchangedByEachReport() {
    AtomicInteger n = new AtomicInteger();
    fake.on(WiggleRpc.REPORT_BATCH, req -> {
      if (n.incrementAndGet() == 1) {
        throw Status.UNAVAILABLE.withDescription("answer lost").asRuntimeException();
      }
      return ReportBatchResponse.newBuilder().addAnswers(named(req.getReports(0))).build();
    });
    Rpc rpc = new Rpc(fake.channel, 10_000, () -> false);
    assertEquals("after-t1", assertDoesNotThrowRpc(
        () -> rpc.call(WiggleRpc.COMPLETE_TASK, complete("t1"), 0, 10_000)).getNextTask().getTaskId());
    List<ReportBatchRequest> sent = fake.sent(ReportBatchRequest.class);
    assertEquals(2, sent.size());
    assertEquals(sent.get(0), sent.get(1)); // same report, same seq
  }

  @Test
  void tooBigTogetherSendsEachReportAloneInABatchOfItsOwn() throws Exception {
    FirstBatchHeld held = new FirstBatchHeld(req -> {
      if (req.getReportsCount() > 1) {
        throw Status.RESOURCE_EXHAUSTED.withDescription("request too large").asRuntimeException();
      }
      return each(ReportBatcherTest::named).apply(req);
    });
    ReportBatcher b = new ReportBatcher(fake.channel);
    Future<TaskReportResponse> first = report(b, "first");
    assertTrue(held.first.await(10, TimeUnit.SECONDS));
    Future<TaskReportResponse> x = report(b, "x");
    Future<TaskReportResponse> y = report(b, "y");
    awaitQueued(b, 2);
    held.letGo.countDown();
    first.get(10, TimeUnit.SECONDS);
    assertEquals("after-x", x.get(10, TimeUnit.SECONDS).getNextTask().getTaskId());
    assertEquals("after-y", y.get(10, TimeUnit.SECONDS).getNextTask().getTaskId());
    List<Integer> sizes = batches(fake).stream().map(List::size).toList();
    assertEquals(List.of(1, 2, 1, 1), sizes);
  }

  @Test
  void aBatchIsSplitBeforeItWouldExceedTheServersRequestLimit() {
    List<ReportBatcher.Pending> items = new ArrayList<>();
    for (String t : List.of("a", "b", "c")) {
      items.add(new ReportBatcher.Pending(ReportKind.COMPLETE.wrap(complete(t)), null));
    }
    int one = items.get(0).report.getSerializedSize() + 2; // tag and length in the request
    assertEquals(List.of(3), ReportBatcher.chunks(items, 3L * one).stream().map(List::size).toList());
    assertEquals(List.of(2, 1), ReportBatcher.chunks(items, 3L * one - 1).stream().map(List::size).toList());
    // A report bigger than the limit still goes, alone.
    assertEquals(List.of(1, 1, 1), ReportBatcher.chunks(items, 1).stream().map(List::size).toList());
  }

  @Test
  void theBatchLimitFollowsTheSmallestRequestLimitATaskCarried() {
    ReportBatcher b = new ReportBatcher(fake.channel);
    assertEquals(ReportBatcher.MAX_BATCH_BYTES, b.maxBytes());
    b.noteLimit(0); // a task of an older server does not say: nothing changes
    assertEquals(ReportBatcher.MAX_BATCH_BYTES, b.maxBytes());
    b.noteLimit(100_000);
    b.noteLimit(1_000_000); // only ever lowered
    assertEquals(100_000, b.maxBytes());
  }

  @Test
  void anOlderServerWithoutReportBatchGetsOneCallPerReportFromThenOn() throws Exception {
    fake.on(WiggleRpc.COMPLETE_TASK, req -> TaskReportResponse.newBuilder()
        .setNextTask(Task.newBuilder().setTaskId("after-" + req.getTaskId())).build());
    fake.on(WiggleRpc.ADVANCE_RUN, req -> AdvanceRunResponse.newBuilder().setKeepGoing(true).build());
    ReportBatcher b = new ReportBatcher(fake.channel);
    assertEquals("after-t1",
        b.call(WiggleRpc.COMPLETE_TASK, complete("t1"), inTenSeconds()).getNextTask().getTaskId());
    assertEquals("after-t2",
        b.call(WiggleRpc.COMPLETE_TASK, complete("t2"), inTenSeconds()).getNextTask().getTaskId());
    assertTrue(b.call(WiggleRpc.ADVANCE_RUN, AdvanceRunRequest.newBuilder().setTaskId("t3").build(),
        inTenSeconds()).getKeepGoing());
    assertEquals(1, fake.sent(ReportBatchRequest.class).size());
    assertEquals(List.of("t1", "t2"),
        fake.sent(CompleteTaskRequest.class).stream().map(CompleteTaskRequest::getTaskId).toList());
  }

  @Test
  void anAnswerOfTheWrongKindIsAnInternalError() {
    answerEach(rep -> TaskReportAnswer.newBuilder()
        .setAdvance(AdvanceRunResponse.getDefaultInstance()).build());
    ReportBatcher b = new ReportBatcher(fake.channel);
    StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
        () -> b.call(WiggleRpc.COMPLETE_TASK, complete("t1"), inTenSeconds()));
    assertEquals(Status.Code.INTERNAL, e.getStatus().getCode());
  }

  // ---- the whole worker ------------------------------------------------------------------

  private static Task serverTask(String id) {
    return WorkerTest.serverTask(id).toBuilder().setActivity("gate").build();
  }

  @Test
  void aWorkersStepsReportThroughReportBatchAndANextTaskHandedBackRuns() throws Exception {
    // Three steps finish at once and report through ReportBatch (how they group is the batcher
    // tests' business); the answer to one hands back the instance's next task, which runs.
    CountDownLatch allRan = new CountDownLatch(3);
    CountDownLatch nextReported = new CountDownLatch(1);
    AtomicInteger polls = new AtomicInteger();
    fake.on(WiggleRpc.POLL_TASKS, req -> PollTasksResponse.newBuilder().addAllTasks(
        polls.incrementAndGet() == 1 ? List.of(serverTask("a"), serverTask("b"), serverTask("c"))
            : List.of()).build());
    fake.on(WiggleRpc.END_POLLS, req -> EndPollsResponse.getDefaultInstance());
    answerEach(rep -> {
      String t = rep.getComplete().getTaskId();
      TaskReportResponse.Builder r = TaskReportResponse.newBuilder();
      if (t.equals("b")) {
        r.setNextTask(serverTask("b2"));
      }
      if (t.equals("b2")) {
        nextReported.countDown();
      }
      return TaskReportAnswer.newBuilder().setTask(r).build();
    });
    Worker w = Worker.builder().channel(fake.channel).queues("q").concurrency(3).workerId("w-1")
        .pollWait(Duration.ofMillis(200)).register("gate", (in, s) -> {
          allRan.countDown();
          await(allRan); // every step of the first poll ends at once
          return IntNode.valueOf(7);
        }).build().start();
    try {
      assertTrue(nextReported.await(10, TimeUnit.SECONDS), "the next task was not run and reported");
    } finally {
      assertTrue(w.close(Duration.ofSeconds(10)));
    }
    List<String> reported = batches(fake).stream().flatMap(List::stream).sorted().toList();
    assertEquals(List.of("a", "b", "b2", "c"), reported);
    assertTrue(fake.sent(CompleteTaskRequest.class).isEmpty(), "a report went alone");
  }

  @Test
  void aDrainWaitsForTheBatchInFlightSoEveryReportIsAnswered() throws Exception {
    CountDownLatch ran = new CountDownLatch(2);
    CountDownLatch batchHeld = new CountDownLatch(1);
    CountDownLatch draining = new CountDownLatch(1);
    AtomicInteger polls = new AtomicInteger();
    AtomicInteger answered = new AtomicInteger();
    fake.on(WiggleRpc.POLL_TASKS, req -> PollTasksResponse.newBuilder().addAllTasks(
        polls.incrementAndGet() == 1 ? List.of(serverTask("a"), serverTask("b")) : List.of())
        .build());
    fake.on(WiggleRpc.END_POLLS, req -> {
      draining.countDown();
      return EndPollsResponse.getDefaultInstance();
    });
    fake.on(WiggleRpc.REPORT_BATCH, req -> {
      batchHeld.countDown();
      await(draining); // answered only once the drain has begun
      ReportBatchResponse.Builder r = ReportBatchResponse.newBuilder();
      req.getReportsList().forEach(rep -> r.addAnswers(TaskReportAnswer.newBuilder()
          .setTask(TaskReportResponse.getDefaultInstance())));
      answered.addAndGet(req.getReportsCount());
      return r.build();
    });
    Worker w = Worker.builder().channel(fake.channel).queues("q").concurrency(2).workerId("w-1")
        .pollWait(Duration.ofMillis(200)).register("gate", (in, s) -> {
          ran.countDown();
          await(ran);
          return IntNode.valueOf(7);
        }).build().start();
    assertTrue(batchHeld.await(10, TimeUnit.SECONDS));
    assertTrue(w.close(Duration.ofSeconds(10)), "the drain did not complete");

    assertEquals(2, answered.get(), "a report was still unanswered when the drain ended");
    assertEquals(List.of("a", "b"), batches(fake).stream().flatMap(List::stream).sorted().toList());
    // Nothing was given back: both steps were reported.
    assertTrue(fake.sent(dev.wiggle.proto.v1.ReleaseTaskRequest.class).isEmpty());
  }

  private static void await(CountDownLatch l) {
    try {
      assertTrue(l.await(10, TimeUnit.SECONDS));
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  private interface RpcCall<T> {
    T call() throws RpcException;
  }

  private static <T> T assertDoesNotThrowRpc(RpcCall<T> c) {
    try {
      return c.call();
    } catch (RpcException e) {
      throw new AssertionError("the report failed: " + e.getMessage(), e);
    }
  }
}
