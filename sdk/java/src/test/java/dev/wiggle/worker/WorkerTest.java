package dev.wiggle.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.IntNode;
import com.google.protobuf.ByteString;
import dev.wiggle.proto.v1.CompleteTaskRequest;
import dev.wiggle.proto.v1.EndPollsRequest;
import dev.wiggle.proto.v1.EndPollsResponse;
import dev.wiggle.proto.v1.ExecutionMode;
import dev.wiggle.proto.v1.InstanceStatus;
import dev.wiggle.proto.v1.PollTasksRequest;
import dev.wiggle.proto.v1.PollTasksResponse;
import dev.wiggle.proto.v1.ReleaseTaskRequest;
import dev.wiggle.proto.v1.Task;
import dev.wiggle.proto.v1.TaskReportResponse;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The whole worker against an in-process fake server: polling, SERVER steps, the drain. */
class WorkerTest {
  private FakeServer fake;

  @BeforeEach
  void setUp() throws Exception {
    fake = new FakeServer();
  }

  @AfterEach
  void tearDown() {
    fake.close();
  }

  /** A SERVER task of activity {@code seven}, leased for a minute (ReportBatcherTest too). */
  static Task serverTask(String id) {
    long now = System.currentTimeMillis();
    return Task.newBuilder().setTaskId(id).setLease("L-" + id).setLeaseExpiresAtMs(now + 60_000)
        .setServerNowMs(now).setInstanceId("i-" + id).setFlow("f").setVersion("v").setNodeId("n")
        .setActivity("seven").setQueue("q").setAttempt(1).setInput(ByteString.copyFromUtf8("{}"))
        .setExecutionMode(ExecutionMode.SERVER).setTimeoutMs(60_000).build();
  }

  private Worker.Builder builder() {
    return Worker.builder().channel(fake.channel).queues("q").concurrency(3).workerId("w-1")
        .pollWait(Duration.ofSeconds(5)).register("seven", (in, s) -> IntNode.valueOf(7));
  }

  @Test
  void aServerStepIsRunAndReportedAndThePollSaysWhoAsks() throws Exception {
    AtomicInteger polls = new AtomicInteger();
    CountDownLatch reported = new CountDownLatch(1);
    fake.on(WiggleRpc.POLL_TASKS, req -> PollTasksResponse.newBuilder()
        .addAllTasks(polls.incrementAndGet() == 1 ? List.of(serverTask("t1")) : List.of()).build());
    fake.on(WiggleRpc.COMPLETE_TASK, req -> {
      reported.countDown();
      return TaskReportResponse.newBuilder().setInstanceStatus(InstanceStatus.COMPLETED).build();
    });
    fake.on(WiggleRpc.END_POLLS, req -> EndPollsResponse.getDefaultInstance());
    Worker w = builder().registerPredicate("maybe", (in, s) -> true).build().start();
    assertTrue(reported.await(10, TimeUnit.SECONDS));
    assertTrue(w.close(Duration.ofSeconds(10)));

    PollTasksRequest poll = fake.sent(PollTasksRequest.class).get(0);
    assertEquals("w-1", poll.getWorkerId());
    assertEquals(List.of("q"), poll.getQueuesList());
    assertEquals(List.of("maybe", "seven"), poll.getActivitiesList());
    assertEquals(3, poll.getSlots());
    assertEquals(3, poll.getMaxTasks());
    assertEquals(Worker.SDK, poll.getSdk());
    CompleteTaskRequest done = fake.sent(CompleteTaskRequest.class).get(0);
    assertEquals("t1", done.getTaskId());
    assertEquals("L-t1", done.getLease());
    assertEquals("7", done.getResult().toStringUtf8());
    assertEquals(1, done.getSeq());
    // It asks for the instance's next task in the same transaction.
    assertEquals("w-1", done.getNext().getWorkerId());
  }

  @Test
  void aDrainEndsThePollAndGivesBackWhatItStillReturns() throws Exception {
    CountDownLatch polling = new CountDownLatch(1);
    CountDownLatch ended = new CountDownLatch(1);
    AtomicBoolean ran = new AtomicBoolean();
    fake.on(WiggleRpc.POLL_TASKS, req -> {
      polling.countDown();
      try {
        // A long poll that the server ends when EndPolls arrives, with a task claimed meanwhile.
        assertTrue(ended.await(10, TimeUnit.SECONDS));
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
      return PollTasksResponse.newBuilder().addTasks(serverTask("late")).build();
    });
    fake.on(WiggleRpc.END_POLLS, req -> {
      ended.countDown();
      return EndPollsResponse.newBuilder().setEnded(1).build();
    });
    fake.on(WiggleRpc.RELEASE_TASK, req -> TaskReportResponse.getDefaultInstance());
    Worker w = Worker.builder().channel(fake.channel).queues("q").workerId("w-1")
        .register("seven", (in, s) -> {
          ran.set(true);
          return IntNode.valueOf(7);
        }).build().start();
    assertTrue(polling.await(10, TimeUnit.SECONDS));
    assertTrue(w.close(Duration.ofSeconds(10)));

    assertEquals("w-1", fake.sent(EndPollsRequest.class).get(0).getWorkerId());
    ReleaseTaskRequest released = fake.sent(ReleaseTaskRequest.class).get(0);
    assertEquals("late", released.getTaskId());
    assertEquals("L-late", released.getLease());
    assertEquals("shutdown", released.getReason());
    assertEquals(1, released.getSeq());
    assertTrue(!ran.get(), "a task received while draining must not run");
  }

  @Test
  void anOlderServerWithoutEndPollsHasItsPollCancelled() throws Exception {
    CountDownLatch polling = new CountDownLatch(1);
    CountDownLatch cancelled = new CountDownLatch(1);
    fake.on(WiggleRpc.POLL_TASKS, req -> {
      polling.countDown();
      // Held open until the client cancels the call (EndPolls is UNIMPLEMENTED here).
      io.grpc.Context.current().addListener(c -> cancelled.countDown(), Runnable::run);
      try {
        cancelled.await(60, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return PollTasksResponse.getDefaultInstance();
    });
    Worker w = builder().pollWait(Duration.ofSeconds(60)).build().start();
    assertTrue(polling.await(10, TimeUnit.SECONDS));
    assertTrue(w.close(Duration.ofSeconds(10)));
    assertTrue(cancelled.await(10, TimeUnit.SECONDS), "the open poll was not cancelled");
  }

  @Test
  void aPollThatFindsTheServerGoneTriesAgainUntilItIsBack() throws Exception {
    AtomicInteger polls = new AtomicInteger();
    CountDownLatch reported = new CountDownLatch(1);
    fake.on(WiggleRpc.POLL_TASKS, req -> {
      int n = polls.incrementAndGet();
      if (n <= 2) {
        throw io.grpc.Status.UNAVAILABLE.withDescription("server restarting").asRuntimeException();
      }
      return PollTasksResponse.newBuilder()
          .addAllTasks(n == 3 ? List.of(serverTask("t1")) : List.of()).build();
    });
    fake.on(WiggleRpc.COMPLETE_TASK, req -> {
      reported.countDown();
      return TaskReportResponse.getDefaultInstance();
    });
    Worker w = builder().build().start();
    assertTrue(reported.await(20, TimeUnit.SECONDS));
    w.close(Duration.ofSeconds(10));
    assertTrue(polls.get() >= 3);
  }

  @Test
  void aPollTheServerCancelsAsItShutsDownIsFollowedByAnother() throws Exception {
    // Fails before the fix: the poll loop took CANCELLED for its own stop and ended for good.
    AtomicInteger polls = new AtomicInteger();
    CountDownLatch reported = new CountDownLatch(1);
    fake.on(WiggleRpc.POLL_TASKS, req -> {
      int n = polls.incrementAndGet();
      if (n == 1) {
        throw io.grpc.Status.CANCELLED.withDescription("server stopping").asRuntimeException();
      }
      return PollTasksResponse.newBuilder()
          .addAllTasks(n == 2 ? List.of(serverTask("t1")) : List.of()).build();
    });
    fake.on(WiggleRpc.COMPLETE_TASK, req -> {
      reported.countDown();
      return TaskReportResponse.getDefaultInstance();
    });
    Worker w = builder().build().start();
    assertTrue(reported.await(20, TimeUnit.SECONDS), "the worker stopped polling");
    w.close(Duration.ofSeconds(10));
  }

  @Test
  void anEagerStartHandsTheFirstTaskToTheWorker() throws Exception {
    CountDownLatch reported = new CountDownLatch(1);
    fake.on(WiggleRpc.POLL_TASKS, req -> PollTasksResponse.getDefaultInstance());
    fake.on(WiggleRpc.START_INSTANCE, req -> dev.wiggle.proto.v1.StartInstanceResponse.newBuilder()
        .setInstanceId("i-eager").setCreated(true).setEagerTask(serverTask("eager")).build());
    fake.on(WiggleRpc.COMPLETE_TASK, req -> {
      reported.countDown();
      return TaskReportResponse.getDefaultInstance();
    });
    Worker w = builder().pollWait(Duration.ofMillis(200)).build().start();
    try (dev.wiggle.client.WiggleClient client = new dev.wiggle.client.WiggleClient(fake.channel)) {
      dev.wiggle.client.WiggleClient.Started s =
          client.startEager("f", IntNode.valueOf(1), w);
      assertEquals("i-eager", s.instanceId());
      assertTrue(s.eager());
      assertTrue(reported.await(10, TimeUnit.SECONDS));
    } finally {
      w.close(Duration.ofSeconds(10));
    }
    dev.wiggle.proto.v1.StartInstanceRequest start =
        fake.sent(dev.wiggle.proto.v1.StartInstanceRequest.class).get(0);
    assertEquals("w-1", start.getEager().getWorkerId());
    assertEquals(List.of("q"), start.getEager().getQueuesList());
    assertEquals(List.of("seven"), start.getEager().getActivitiesList());
    assertEquals("eager", fake.sent(CompleteTaskRequest.class).get(0).getTaskId());
  }

  @Test
  void badSettingsAreRefusedWithAClearMessage() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> builder().concurrency(0).build());
    assertTrue(e.getMessage().contains("concurrency"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> builder().workerId("x".repeat(201)).build());
    assertTrue(e.getMessage().contains("200"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class,
        () -> builder().register("seven", (in, s) -> in));
    assertTrue(e.getMessage().contains("already registered"), e.getMessage());
    e = assertThrows(IllegalArgumentException.class, () -> Worker.builder().build());
    assertTrue(e.getMessage().contains("connection"), e.getMessage());
  }
}
