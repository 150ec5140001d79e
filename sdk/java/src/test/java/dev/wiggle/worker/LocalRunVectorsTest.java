package dev.wiggle.worker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.BooleanNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.TextNode;
import com.google.protobuf.ByteString;
import dev.wiggle.Repo;
import dev.wiggle.graph.Graph;
import dev.wiggle.graph.GraphParser;
import dev.wiggle.graph.Node;
import dev.wiggle.proto.v1.AdvanceRunRequest;
import dev.wiggle.proto.v1.AdvanceRunResponse;
import dev.wiggle.proto.v1.ExecutionMode;
import dev.wiggle.proto.v1.HeartbeatResponse;
import dev.wiggle.proto.v1.InstanceStatus;
import dev.wiggle.proto.v1.StepResult;
import dev.wiggle.proto.v1.Task;
import dev.wiggle.proto.v1.TaskReportResponse;
import io.grpc.Status;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The local-run vectors of spec/conformance/localrun/, run against the real local-run driver over
 * an in-process fake server: the same vectors the Python and Go workers pass.
 */
class LocalRunVectorsTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @TestFactory
  List<DynamicTest> vectors() throws Exception {
    List<Path> files;
    try (Stream<Path> s = Files.list(Repo.root().resolve("spec/conformance/localrun"))) {
      files = s.filter(p -> p.toString().endsWith(".json")).sorted().toList();
    }
    List<DynamicTest> tests = new ArrayList<>();
    for (Path file : files) {
      JsonNode doc = JSON.readTree(file.toFile());
      Graph g = GraphParser.parse(JSON.writeValueAsBytes(doc.get("graph")));
      for (JsonNode c : doc.get("cases")) {
        tests.add(DynamicTest.dynamicTest(file.getFileName() + ": " + c.get("description").asText(),
            () -> run(g, c)));
      }
    }
    assertTrue(tests.size() >= 40, "only " + tests.size() + " local-run vectors");
    return tests;
  }

  private static void run(Graph g, JsonNode c) throws Exception {
    try (FakeServer fake = new FakeServer()) {
      List<String> reports = new ArrayList<>();
      fake.on(WiggleRpc.ADVANCE_RUN, req -> {
        if (c.get("advance_run").asText().equals("unimplemented")) {
          reports.add(render(req));
          throw Status.UNIMPLEMENTED.withDescription("no AdvanceRun here").asRuntimeException();
        }
        reports.add(render(req));
        long now = System.currentTimeMillis();
        return AdvanceRunResponse.newBuilder().setInstanceStatus(InstanceStatus.RUNNING)
            .setKeepGoing(!req.getFinal()).setLeaseExpiresAtMs(now + 60_000).setServerNowMs(now)
            .build();
      });
      fake.on(WiggleRpc.COMPLETE_TASK, req -> report(reports, "complete " + req.getTaskId()));
      fake.on(WiggleRpc.FAIL_TASK, req -> report(reports, "fail " + req.getTaskId()));
      fake.on(WiggleRpc.HEARTBEAT, req -> {
        long now = System.currentTimeMillis();
        return HeartbeatResponse.newBuilder().setInstanceStatus(InstanceStatus.RUNNING)
            .setLeaseExpiresAtMs(now + 60_000).setServerNowMs(now).build();
      });

      Deque<String> outcomes = new ArrayDeque<>();
      c.get("steps").forEach(s -> outcomes.add(s.asText()));
      List<Integer> attempts = new ArrayList<>();
      Lease[] lease = new Lease[1];
      Env[] env = new Env[1];
      Activity handler = (in, step) -> {
        attempts.add(step.attempt());
        int n = attempts.size();
        String outcome = outcomes.poll();
        try {
          if (outcome == null) {
            throw new IllegalStateException("the vector has no outcome left for this step");
          }
          String[] kind = outcome.split(" ");
          switch (kind[0]) {
            case "fail":
              throw new IllegalStateException("planned failure " + n);
            case "true":
            case "false":
              return BooleanNode.valueOf(kind[0].equals("true"));
            case "not_boolean":
              return JsonNodeFactory.instance.objectNode().put("not", "a boolean");
            default:
              if (kind.length > 1) { // a JSON value whose encoding is exactly N bytes
                return TextNode.valueOf("x".repeat(Integer.parseInt(kind[1]) - 2));
              }
              return JsonNodeFactory.instance.objectNode().put("step", n);
          }
        } finally {
          after(c.path("after_step").path(String.valueOf(n)).asText(""), env[0], lease[0]);
        }
      };
      Registry registry = new Registry();
      JsonNode only = c.get("worker_activities");
      for (Node node : g.nodes().values()) {
        String a = node.activity();
        boolean listed = only == null || only.isNull() || contains(only, a);
        if (node.isWorkerStep() && listed && registry.get(a) == null) {
          registry.add(a, new Registry.Handler(handler, null));
        }
      }
      List<String> queues = new ArrayList<>();
      c.get("worker_queues").forEach(q -> queues.add(q.asText()));
      Rpc rpc = new Rpc(fake.channel, 5_000, () -> false);
      env[0] = new Env(rpc, registry, queues, new LeaseKeeper(rpc), c.get("batch_size").asInt(), "w");
      try {
        String start = c.get("start").asText();
        long now = System.currentTimeMillis();
        Task t = Task.newBuilder().setTaskId(start).setLease("lease-1")
            .setLeaseExpiresAtMs(now + 60_000).setServerNowMs(now).setInstanceId("i-1")
            .setFlow(g.name()).setVersion(g.version()).setNodeId(start)
            .setActivity(g.node(start).activity()).setQueue(queues.get(0))
            .setAttempt(c.get("attempt").asInt()).setInput(ByteString.copyFromUtf8("{}"))
            .setExecutionMode(ExecutionMode.valueOf(c.get("mode").asText()))
            .setLoopCounts(ByteString.copyFromUtf8(JSON.writeValueAsString(c.get("loop_counts"))))
            .setTimeoutMs(60_000).setMaxRequestBytes(c.get("max_request_bytes").asLong())
            .build();
        lease[0] = TaskRunner.hold(env[0], t, System.nanoTime());
        new LocalRun(env[0], t, g, lease[0]).run();
      } finally {
        env[0].keeper.stop();
      }

      List<String> expect = new ArrayList<>();
      c.get("expect").forEach(e -> expect.add(e.asText()));
      assertEquals(expect, reports);
      assertTrue(outcomes.isEmpty(), "steps the worker never ran: " + outcomes);
      if (c.hasNonNull("expect_attempts")) {
        List<Integer> want = new ArrayList<>();
        c.get("expect_attempts").forEach(a -> want.add(a.asInt()));
        assertEquals(want, attempts);
      }
    }
  }

  /** What the worker finds between steps, after the step just run. */
  private static void after(String what, Env env, Lease lease) {
    switch (what) {
      case "shutdown" -> env.draining = true;
      case "lease_budget" -> { // a tenth of the lease left
        long now = System.currentTimeMillis();
        lease.renewed(now + lease.lengthMs() / 10, now, System.nanoTime(), 0);
      }
      case "lease_lost" -> lease.lose("the vector says so");
      default -> { }
    }
  }

  private static TaskReportResponse report(List<String> reports, String line) {
    reports.add(line);
    return TaskReportResponse.newBuilder().setInstanceStatus(InstanceStatus.RUNNING).build();
  }

  /** An AdvanceRun as the vectors write it: {@code advance a p=true f! / reason}. */
  private static String render(AdvanceRunRequest req) {
    StringBuilder b = new StringBuilder("advance");
    for (StepResult s : req.getStepsList()) {
      b.append(' ').append(s.getNodeId());
      switch (s.getOutcomeCase()) {
        case PREDICATE -> b.append('=').append(s.getPredicate());
        case FAILURE -> b.append('!');
        default -> { }
      }
    }
    if (req.getFinal()) {
      b.append(" / ").append(req.getHandbackReason());
    }
    return b.toString();
  }

  private static boolean contains(JsonNode list, String value) {
    for (JsonNode v : list) {
      if (v.asText().equals(value)) {
        return true;
      }
    }
    return false;
  }

}
