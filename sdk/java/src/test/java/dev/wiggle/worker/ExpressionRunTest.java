package dev.wiggle.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.protobuf.ByteString;
import dev.wiggle.graph.Graph;
import dev.wiggle.proto.v1.AdvanceRunRequest;
import dev.wiggle.proto.v1.AdvanceRunResponse;
import dev.wiggle.proto.v1.ExecutionMode;
import dev.wiggle.proto.v1.InstanceStatus;
import dev.wiggle.proto.v1.StepFailure;
import dev.wiggle.proto.v1.StepResult;
import dev.wiggle.proto.v1.Task;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Expression nodes (condition, set) in a local run (docs/worker-protocol.md, "Expression nodes
 * in a run", W32): evaluated by the worker, buffered with the worker step before them, never a
 * handback, never flushed alone, not counted in the batch size.
 */
class ExpressionRunTest {
  private FakeServer fake;
  private Registry registry;
  private Env env;
  /** The node ids handlers were called at, in order. */
  private final List<String> called = new ArrayList<>();

  @BeforeEach
  void setUp() throws Exception {
    fake = new FakeServer();
    registry = new Registry();
    for (String name : List.of("a", "b", "c")) {
      registry.add(name, new Registry.Handler(this::append, null));
    }
    registry.add("same", new Registry.Handler((in, s) -> {
      called.add(s.nodeId());
      return in;
    }, null));
    registry.add("list", new Registry.Handler((in, s) -> {
      called.add(s.nodeId());
      return Json.mapper().createArrayNode().add(1);
    }, null));
    registry.add("stop", new Registry.Handler((in, s) -> {
      called.add(s.nodeId());
      env.draining = true;
      return in;
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

  private JsonNode append(JsonNode in, StepInfo s) {
    called.add(s.nodeId());
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

  private static Task task(Graph g, String node, ExecutionMode mode, String input) {
    long now = System.currentTimeMillis();
    return Task.newBuilder().setTaskId("t1").setLease("L1").setLeaseExpiresAtMs(now + 60_000)
        .setServerNowMs(now).setInstanceId("i1").setFlow("test").setVersion(g.version())
        .setNodeId(node).setActivity(g.node(node).activity()).setQueue("default").setAttempt(1)
        .setInput(ByteString.copyFromUtf8(input)).setExecutionMode(mode)
        .setTimeoutMs(g.node(node).timeoutMs()).build();
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

  /** The buffered result of {@code node} in the AdvanceRuns sent, the last one if several. */
  private StepResult step(String node) {
    StepResult found = null;
    for (AdvanceRunRequest r : fake.sent(AdvanceRunRequest.class)) {
      for (StepResult s : r.getStepsList()) {
        if (s.getNodeId().equals(node)) {
          found = s;
        }
      }
    }
    assertTrue(found != null, "no step result for " + node);
    return found;
  }

  private static String context(StepResult s) {
    return s.getContext().toString(StandardCharsets.UTF_8);
  }

  @Test
  void localSyncSendsTheWorkerStepWithTheExpressionsAfterIt() {
    Graph g = new Graphs("a").task("a", "set-1").set("set-1", "if-1", "n", "size(ctx.trail) + 1")
        .condition("if-1", "ctx.n == 2", "b", "c", null).task("b", "end").task("c", "end").graph();
    LocalRun r = run(g, task(g, "a", ExecutionMode.LOCAL_SYNC, "{}"));
    assertEquals(List.of("1:a,set-1,if-1", "2:b:final:end"), batches());
    assertEquals("end", r.handback);
    assertEquals("{\"trail\":[\"a\"],\"n\":2}", context(step("set-1")));
    assertEquals(StepResult.OutcomeCase.PREDICATE, step("if-1").getOutcomeCase());
    assertTrue(step("if-1").getPredicate());
    // The next worker step receives the set's context; no handler ran for an expression node.
    assertEquals("{\"trail\":[\"a\",\"b\"],\"n\":2}", context(step("b")));
    assertEquals(List.of("a", "b"), called);
  }

  @Test
  void aFalseConditionTakesItsAltAndAPredicateLeavesTheContextAsItWas() {
    Graph g = new Graphs("a").task("a", "if-1").condition("if-1", "ctx.trail[0] == 'x'", "b", "c", null)
        .task("b", "end").task("c", "end").graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC, "{}"));
    assertEquals(List.of("1:a,if-1,c:final:end"), batches());
    assertFalse(step("if-1").getPredicate());
    assertEquals("{\"trail\":[\"a\",\"c\"]}", context(step("c")));
  }

  @Test
  void theBatchSizeCountsWorkerStepsOnly() {
    env = env(2);
    Graph g = new Graphs("a").task("a", "s1").set("s1", "b", "x", "1").task("b", "s2")
        .set("s2", "c", "y", "2").task("c", "end").graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC, "{}"));
    // The flush after the second worker step comes after the expression that follows it.
    assertEquals(List.of("1:a,s1,b,s2", "2:c:final:end"), batches());
  }

  @Test
  void theFlushAfterACheckpointComesAfterTheExpressionsThatFollowIt() {
    Graph g = new Graphs("a").task("a", "default", "s1", true, 60_000).set("s1", "f1", "x", "1")
        .condition("f1", "ctx.x == 1", "b", null, null).task("b", "end").graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC, "{}"));
    assertEquals(List.of("1:a,s1,f1", "2:b:final:end"), batches());
  }

  @Test
  void aChainThatEndsTheFlowGoesInTheFinalCall() {
    Graph g = new Graphs("a").task("a", "s1").set("s1", "end", "done", "true").graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_SYNC, "{}"));
    assertEquals(List.of("1:a,s1:final:end"), batches());
    assertEquals("{\"trail\":[\"a\"],\"done\":true}", context(step("s1")));
  }

  @Test
  void aFalseFilterConditionEndsTheToken() {
    Graph g = new Graphs("a").task("a", "f1").condition("f1", "size(ctx.trail) > 5", "b", null, null)
        .task("b", "end").graph();
    LocalRun r = run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC, "{}"));
    assertEquals(List.of("1:a,f1:final:filtered"), batches());
    assertEquals("filtered", r.handback);
  }

  @Test
  void aWhileConditionTrueForTheMaxIterationsthTimeIsALoopLimit() {
    Graph g = new Graphs("a").task("a", "while-1")
        .condition("while-1", "size(ctx.trail) < 100", "a", "end", 2).graph();
    LocalRun r = run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC, "{}"));
    assertEquals(List.of("1:a,while-1,a,while-1:final:loop_limit"), batches());
    assertEquals("loop_limit", r.handback);
  }

  @Test
  void aLoopOfExpressionsOnlyStopsAtItsLimit() {
    Graph g = new Graphs("a").task("a", "s1").set("s1", "while-1", "n", "ctx.n + 1")
        .condition("while-1", "true", "s1", "end", 3).graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC, "{\"n\":0}"));
    assertEquals(List.of("1:a,s1,while-1,s1,while-1,s1,while-1:final:loop_limit"), batches());
  }

  @Test
  void anExpressionErrorFailsTheRunForGoodNamingItsKind() {
    Graph g = new Graphs("a").task("a", "f1").condition("f1", "ctx.nothing > 1", "b", null, null)
        .task("b", "end").graph();
    LocalRun r = run(g, task(g, "a", ExecutionMode.LOCAL_SYNC, "{}"));
    assertEquals(List.of("1:a,f1:final:step_failed"), batches());
    assertEquals("step_failed", r.handback);
    StepFailure f = step("f1").getFailure();
    assertTrue(f.getMessage().startsWith("no_such_key: "), f.getMessage());
    assertTrue(f.getMessage().endsWith(" (expression 'ctx.nothing > 1')"), f.getMessage());
    assertTrue(f.getNonRetryable());
    assertEquals("ExpressionError", f.getErrorType());
    assertEquals(List.of("a"), called);
  }

  @Test
  void aConditionThatIsNotABooleanFails() {
    Graph g = new Graphs("a").task("a", "f1").condition("f1", "size(ctx.trail)", "b", null, null)
        .task("b", "end").graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_ASYNC, "{}"));
    assertEquals(List.of("1:a,f1:final:step_failed"), batches());
    assertTrue(step("f1").getFailure().getMessage().startsWith("not_boolean: "));
  }

  @Test
  void aDivisionByZeroInASetFails() {
    Graph g = new Graphs("same").task("same", "s1").set("s1", "end", "x", "10 / ctx.zero").graph();
    run(g, task(g, "same", ExecutionMode.LOCAL_ASYNC, "{\"zero\":0}"));
    assertEquals(List.of("1:same,s1:final:step_failed"), batches());
    StepFailure f = step("s1").getFailure();
    assertTrue(f.getMessage().startsWith("division_by_zero: "), f.getMessage());
    assertTrue(f.getMessage().endsWith("(expression '10 / ctx.zero')"), f.getMessage());
  }

  @Test
  void aSetOnAContextThatIsNotAnObjectIsATypeMismatch() {
    Graph g = new Graphs("list").task("list", "s1").set("s1", "end", "y", "1").graph();
    run(g, task(g, "list", ExecutionMode.LOCAL_ASYNC, "{}"));
    assertEquals(List.of("1:list,s1:final:step_failed"), batches());
    StepFailure f = step("s1").getFailure();
    assertEquals("type_mismatch: set 's1' needs an object context; the context is a list",
        f.getMessage());
    assertTrue(f.getNonRetryable());
    assertEquals("ExpressionError", f.getErrorType());
  }

  @Test
  void aGraphExpressionThatDoesNotCompileFailsItsNode() {
    Graph g = new Graphs("same").task("same", "s1").set("s1", "end", "y", "1 +").graph();
    run(g, task(g, "same", ExecutionMode.LOCAL_ASYNC, "{}"));
    assertEquals(List.of("1:same,s1:final:step_failed"), batches());
    assertTrue(step("s1").getFailure().getMessage().startsWith("invalid_argument: does not compile"));
  }

  @Test
  void everyValueOfASetSeesTheIncomingContextAndNumbersStayExact() throws Exception {
    Graph g = new Graphs("same").task("same", "s1").set("s1", "end",
        "n", "ctx.n + 100",
        "total", "ctx.price * ctx.n + 1",
        "half", "double(ctx.price) / 4.0",
        "third", "1.0 / 3.0",
        "tenth", "0.1",
        "sum", "0.1 + 0.2",
        "nested", "[0.1, {'k': 2.5e-7}]",
        "whole", "ctx.four",
        "seen", "{'n_before': ctx.n, 'flow': instance.flow, 'id': instance.id}").graph();
    String input = "{\"price\":6,\"n\":1,\"four\":4.0,\"keep\":0.10,"
        + "\"huge\":123456789012345678901234567890}";
    run(g, task(g, "same", ExecutionMode.LOCAL_ASYNC, input));
    assertEquals(List.of("1:same,s1:final:end"), batches());
    String got = context(step("s1"));
    JsonNode c = Json.parse(got);
    assertEquals(101, c.get("n").asLong());
    assertEquals("7", c.get("total").toString()); // ints stay ints
    assertEquals("1.5", c.get("half").toString());
    assertEquals(1.0 / 3.0, c.get("third").doubleValue());
    // A double goes out as the shortest text that reads back as it, never as its binary expansion.
    assertTrue(got.contains("\"tenth\":0.1,"), got);
    assertTrue(got.contains("\"sum\":0.30000000000000004,"), got);
    assertEquals(0.1, c.get("nested").get(0).doubleValue());
    assertEquals(2.5e-7, c.get("nested").get(1).get("k").doubleValue());
    assertTrue(c.get("nested").get(0).toString().length() <= 4, got);
    assertEquals("4", c.get("whole").toString()); // an integral number maps to an int
    assertEquals("{\"n_before\":1,\"flow\":\"test\",\"id\":\"i1\"}", c.get("seen").toString());
    // Keys the set does not touch pass through exactly as they came.
    assertTrue(got.contains("\"keep\":0.10"), got);
    assertTrue(got.contains("\"huge\":123456789012345678901234567890"), got);
    assertTrue(got.contains("\"four\":4.0"), got);
  }

  @Test
  void aSetResultOverThePayloadLimitFailsForGood() {
    Graph g = new Graphs("same").task("same", "s1").set("s1", "end", "big", "'x'")
        .graph();
    // A limit the input fits and the set's result does not.
    Task t = task(g, "same", ExecutionMode.LOCAL_ASYNC, "{\"pad\":\"" + "p".repeat(80) + "\"}")
        .toBuilder().setMaxPayloadBytes(95).build();
    run(g, t);
    assertEquals(List.of("1:same,s1:final:step_failed"), batches());
    assertTrue(step("s1").getFailure().getNonRetryable());
  }

  @Test
  void aDrainStopsTheRunAtTheWorkerStepAfterTheChainWithTheChainInTheFinalCall() {
    Graph g = new Graphs("stop").task("stop", "s1").set("s1", "b", "x", "1").task("b", "end")
        .graph();
    run(g, task(g, "stop", ExecutionMode.LOCAL_ASYNC, "{}"));
    assertEquals(List.of("1:stop,s1:final:shutdown"), batches());
  }

  @Test
  void aChainToAStepOnAnotherQueueHandsBackThere() {
    Graph g = new Graphs("a").task("a", "s1").set("s1", "z", "x", "1")
        .task("z", "other", "end", false, 60_000).graph();
    run(g, task(g, "a", ExecutionMode.LOCAL_SYNC, "{}"));
    assertEquals(List.of("1:a,s1:final:other_queue"), batches());
  }

  @Test
  void anExpressionIsCompiledOnce() {
    String source = "ctx.compiled_once_" + System.nanoTime() + " == 1";
    assertSame(ExpressionNodes.compiled(source), ExpressionNodes.compiled(source));
  }
}
