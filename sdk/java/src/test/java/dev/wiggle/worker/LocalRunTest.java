package dev.wiggle.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.node.TextNode;
import com.google.protobuf.ByteString;
import dev.wiggle.graph.Graph;
import dev.wiggle.proto.v1.AdvanceRunRequest;
import dev.wiggle.proto.v1.AdvanceRunResponse;
import dev.wiggle.proto.v1.CompleteTaskRequest;
import dev.wiggle.proto.v1.ExecutionMode;
import dev.wiggle.proto.v1.HeartbeatRequest;
import dev.wiggle.proto.v1.HeartbeatResponse;
import dev.wiggle.proto.v1.InstanceStatus;
import dev.wiggle.proto.v1.ReleaseTaskRequest;
import dev.wiggle.proto.v1.StepResult;
import dev.wiggle.proto.v1.Task;
import dev.wiggle.proto.v1.TaskReportResponse;
import io.grpc.Status;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The local-run driver against an in-process fake server: what it reports, when, and how. */
class LocalRunTest {
  private FakeServer fake;
  private Registry registry;
  private Env env;

  @BeforeEach
  void setUp() throws Exception {
    fake = new FakeServer();
    registry = new Registry();
    for (String name : List.of("a", "b", "c", "d", "e")) {
      registry.add(name, new Registry.Handler(LocalRunTest::append, null));
    }
    registry.add("p", new Registry.Handler(null, (in, s) -> in.path("go").asBoolean()));
    registry.add("fails", new Registry.Handler((in, s) -> {
      throw new IllegalStateException("boom at " + s.nodeId());
    }, null));
    fake.on(WiggleRpc.ADVANCE_RUN, req -> answer(req.getFinal()));
    env = env(64);
  }

  @AfterEach
  void tearDown() {
    env.keeper.stop();
    fake.close();
  }

  private Env env(int batch) {
    if (env != null) {
      env.keeper.stop();
    }
    Rpc rpc = new Rpc(fake.channel, 5_000, () -> false);
    return new Env(rpc, registry, List.of("default"), new LeaseKeeper(rpc), batch, "w1");
  }

  private static JsonNode append(JsonNode in, StepInfo s) {
    ObjectNode c = in.deepCopy();
    ArrayNode trail = c.has("trail") ? (ArrayNode) c.get("trail") : c.putArray("trail");
    trail.add(s.nodeId());
    return c;
  }

  private static AdvanceRunResponse answer(boolean fin) {
    long now = System.currentTimeMillis();
    return AdvanceRunResponse.newBuilder().setInstanceStatus(InstanceStatus.RUNNING)
        .setLeaseExpiresAtMs(now + 60_000).setServerNowMs(now).setKeepGoing(!fin).build();
  }

  private static Task.Builder task(Graph g, String node, ExecutionMode mode) {
    long now = System.currentTimeMillis();
    return Task.newBuilder().setTaskId("t1").setLease("L1").setLeaseExpiresAtMs(now + 60_000)
        .setServerNowMs(now).setInstanceId("i1").setFlow("test").setVersion(g.version())
        .setNodeId(node).setActivity(g.node(node).activity()).setQueue("default").setAttempt(1)
        .setInput(ByteString.copyFromUtf8("{}")).setExecutionMode(mode)
        .setTimeoutMs(g.node(node).timeoutMs());
  }

  private LocalRun run(Graph g, Task t) {
    Lease lease = TaskRunner.hold(env, t, System.nanoTime());
    LocalRun r = new LocalRun(env, t, g, lease);
    r.run();
    env.keeper.drop(lease);
    return r;
  }

  /** Each AdvanceRun as "seq:[nodes]:final:reason". */
  private List<String> batches() {
    return fake.sent(AdvanceRunRequest.class).stream().map(r -> r.getSeq() + ":"
        + r.getStepsList().stream().map(StepResult::getNodeId).collect(Collectors.joining(","))
        + (r.getFinal() ? ":final:" + r.getHandbackReason() : "")).toList();
  }

  private static Graph linear() {
    return new Graphs("a").task("a", "b").task("b", "c").task("c", "end").graph();
  }

  @Test
  void localSyncReportsEveryStepUnderRisingSeq() {
    LocalRun r = run(linear(), task(linear(), "a", ExecutionMode.LOCAL_SYNC).build());
    assertEquals(List.of("1:a", "2:b", "3:c:final:end"), batches());
    assertEquals("end", r.handback);
    JsonNode last = context(fake.sent(AdvanceRunRequest.class).get(2).getSteps(0));
    assertEquals("[\"a\",\"b\",\"c\"]", last.get("trail").toString());
  }

  @Test
  void localAsyncBuffersTheWholeRun() {
    run(linear(), task(linear(), "a", ExecutionMode.LOCAL_ASYNC).build());
    assertEquals(List.of("1:a,b,c:final:end"), batches());
    assertEquals(1, env.advanceRun.get());
  }

  @Test
  void aStepWhoseActivityThisWorkerLacksIsHandedBack() {
    Graph g = new Graphs("a").task("a", "b").task("b", "c").task("c", "end").graph();
    registry = new Registry();
    registry.add("a", new Registry.Handler(LocalRunTest::append, null));
    env = env(64);
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC).build());
    assertEquals(List.of("1:a:final:unknown_activity"), batches());
  }

  @Test
  void aReportRefusedForGoodGivesTheTaskBackUnderItsSeq() {
    fake.on(WiggleRpc.ADVANCE_RUN, req -> {
      throw Status.INVALID_ARGUMENT.withDescription("WRONG_PATH").asRuntimeException();
    });
    fake.on(WiggleRpc.RELEASE_TASK, req -> TaskReportResponse.getDefaultInstance());
    LocalRun r = run(linear(), task(linear(), "a", ExecutionMode.LOCAL_SYNC).build());
    assertEquals(List.of("1:a"), batches());
    assertEquals("refused", r.handback);
    List<ReleaseTaskRequest> released = fake.sent(ReleaseTaskRequest.class);
    assertEquals(1, released.size());
    assertEquals(1, released.get(0).getSeq()); // the refused report was not applied
  }

  @Test
  void aCheckpointFlushIncludesTheCheckpointStep() {
    Graph g = new Graphs("a").task("a", "b").task("b", "default", "c", true, 60_000)
        .task("c", "end").graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC).build());
    assertEquals(List.of("1:a,b", "2:c:final:end"), batches());
  }

  @Test
  void aChainLongerThanTheBatchSizeFlushesEveryBatch() {
    env = env(2);
    Graph g = new Graphs("a").task("a", "b").task("b", "c").task("c", "d").task("d", "e")
        .task("e", "end").graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC).build());
    assertEquals(List.of("1:a,b", "2:c,d", "3:e:final:end"), batches());
  }

  @Test
  void aStepOnAnotherQueueEndsTheRun() {
    Graph g = new Graphs("a").task("a", "b").task("b", "other", "end", false, 60_000).graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC).build());
    assertEquals(List.of("1:a:final:other_queue"), batches());
  }

  @Test
  void aFailureGoesWithTheSuccessfulPrefix() {
    Graph g = new Graphs("a").task("a", "fails").task("fails", "c").task("c", "end").graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC).build());
    assertEquals(List.of("1:a,fails:final:step_failed"), batches());
    StepResult failed = fake.sent(AdvanceRunRequest.class).get(0).getSteps(1);
    assertEquals("boom at fails", failed.getFailure().getMessage());
    assertFalse(failed.getFailure().getNonRetryable());
  }

  @Test
  void aFalseFilterEndsTheToken() {
    Graph g = new Graphs("a").task("a", "p").predicate("p", "b", null).task("b", "end").graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC).build());
    assertEquals(List.of("1:a,p:final:filtered"), batches());
    assertFalse(fake.sent(AdvanceRunRequest.class).get(0).getSteps(1).getPredicate());
  }

  @Test
  void aSleepIsAHandback() {
    Graph g = new Graphs("a").task("a", "s").sleep("s", "b").task("b", "end").graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_SYNC).build());
    assertEquals(List.of("1:a:final:sleep"), batches());
  }

  @Test
  void aServerWithoutAdvanceRunGetsTheFirstStepAsCompleteTaskUnderTheSameSeq() {
    fake.on(WiggleRpc.ADVANCE_RUN, null);
    fake.on(WiggleRpc.COMPLETE_TASK, req -> TaskReportResponse.newBuilder()
        .setInstanceStatus(InstanceStatus.RUNNING).build());
    LocalRun r = run(linear(), task(linear(), "a", ExecutionMode.LOCAL_ASYNC).build());
    assertEquals(List.of("1:a,b,c:final:end"), batches());
    assertEquals("fallback", r.handback);
    assertEquals(-1, env.advanceRun.get());
    List<CompleteTaskRequest> done = fake.sent(CompleteTaskRequest.class);
    assertEquals(1, done.size());
    // The refused AdvanceRun was never applied: the CompleteTask takes its number.
    assertEquals(1, done.get(0).getSeq());
    assertEquals("{\"trail\":[\"a\"]}", done.get(0).getResult().toStringUtf8());
  }

  @Test
  void aReportWhoseAnswerWasLostIsResentUnderTheSameSeq() {
    AtomicInteger calls = new AtomicInteger();
    fake.on(WiggleRpc.ADVANCE_RUN, req -> {
      if (calls.incrementAndGet() == 1) {
        throw Status.UNAVAILABLE.withDescription("connection reset").asRuntimeException();
      }
      return answer(req.getFinal());
    });
    run(linear(), task(linear(), "a", ExecutionMode.LOCAL_SYNC).build());
    assertEquals(List.of("1:a", "1:a", "2:b", "3:c:final:end"), batches());
    List<AdvanceRunRequest> sent = fake.sent(AdvanceRunRequest.class);
    assertEquals(sent.get(0), sent.get(1));
  }

  @Test
  void aResultOverThePayloadLimitFailsTheStepForGood() {
    registry.add("big", new Registry.Handler((in, s) -> TextNode.valueOf("x".repeat(500)), null));
    Graph g = new Graphs("big").task("big", "end").graph();
    run(g, task(g, "big", ExecutionMode.LOCAL_SYNC).setMaxPayloadBytes(100).build());
    assertEquals(List.of("1:big:final:step_failed"), batches());
    StepResult s = fake.sent(AdvanceRunRequest.class).get(0).getSteps(0);
    assertTrue(s.getFailure().getNonRetryable());
    assertEquals("step result is 502 bytes; the limit is 100 bytes (max_payload_bytes)",
        s.getFailure().getMessage());
  }

  @Test
  void aBatchIsFlushedBeforeItWouldExceedTheRequestLimit() {
    for (String name : List.of("p1", "p2", "p3")) {
      registry.add(name, new Registry.Handler((in, s) -> TextNode.valueOf("y".repeat(700)), null));
    }
    Graph g = new Graphs("p1").task("p1", "p2").task("p2", "p3").task("p3", "end").graph();
    // Room for the 1 KiB margin, the request's own fields and two 700-byte results, not three.
    long limit = 1_024 + 1_500;
    run(g, task(g, "p1", ExecutionMode.LOCAL_ASYNC).setMaxRequestBytes(limit).build());
    assertEquals(List.of("1:p1,p2", "2:p3:final:end"), batches());
    for (AdvanceRunRequest r : fake.sent(AdvanceRunRequest.class)) {
      assertTrue(r.getSerializedSize() <= limit - 1_024, "request of " + r.getSerializedSize());
    }
  }

  @Test
  void tooLittleLeaseLeftHandsBack() {
    long now = System.currentTimeMillis();
    // The server's clock says 10 of 60 s are left, whatever this host's clock says.
    Task t = task(linear(), "a", ExecutionMode.LOCAL_ASYNC)
        .setServerNowMs(now - 3_600_000).setLeaseExpiresAtMs(now - 3_600_000 + 10_000).build();
    run(linear(), t);
    assertEquals(List.of("1:a:final:lease_budget"), batches());
  }

  @Test
  void aLongerNextStepIsHeartbeatenForByItsNodeFirst() {
    fake.on(WiggleRpc.HEARTBEAT, req -> {
      long now = System.currentTimeMillis();
      return HeartbeatResponse.newBuilder().setInstanceStatus(InstanceStatus.RUNNING)
          .setServerNowMs(now).setLeaseExpiresAtMs(now + 600_000).build();
    });
    Graph g = new Graphs("a").task("a", "default", "b", false, 1_000)
        .task("b", "default", "end", false, 600_000).graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC).build());
    List<HeartbeatRequest> beats = fake.sent(HeartbeatRequest.class);
    assertEquals(1, beats.size());
    assertEquals("b", beats.get(0).getNodeId());
    assertEquals(List.of("1:a,b:final:end"), batches());
  }

  @Test
  void aDrainHandsBackWhatIsBuffered() {
    registry.add("stop", new Registry.Handler((in, s) -> {
      env.draining = true;
      return in;
    }, null));
    Graph g = new Graphs("a").task("a", "stop").task("stop", "c").task("c", "end").graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC).build());
    assertEquals(List.of("1:a,stop:final:shutdown"), batches());
  }

  @Test
  void anInstanceNoLongerRunningStopsTheRun() {
    fake.on(WiggleRpc.ADVANCE_RUN, req -> AdvanceRunResponse.newBuilder()
        .setInstanceStatus(InstanceStatus.CANCELLED).build());
    LocalRun r = run(linear(), task(linear(), "a", ExecutionMode.LOCAL_SYNC).build());
    assertEquals(List.of("1:a"), batches());
    assertEquals("not_running", r.handback);
  }

  private static JsonNode context(StepResult s) {
    try {
      return Json.parse(s.getContext().toString(StandardCharsets.UTF_8));
    } catch (java.io.IOException e) {
      throw new AssertionError(e);
    }
  }
}
