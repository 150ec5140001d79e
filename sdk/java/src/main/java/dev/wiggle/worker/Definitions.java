package dev.wiggle.worker;

import dev.wiggle.graph.Graph;
import dev.wiggle.graph.GraphException;
import dev.wiggle.graph.GraphParser;
import dev.wiggle.proto.v1.Definition;
import dev.wiggle.proto.v1.GetDefinitionRequest;
import java.lang.System.Logger.Level;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * The pinned graphs local runs chain on, fetched once per version: a burst of tasks of a new
 * version waits for one GetDefinition rather than each making its own. A worker that cannot get
 * (or read) the pinned version runs the task as a SERVER step: slower, never wrong. A failure is
 * remembered for a while, so a missing definition does not cost a call per task.
 */
final class Definitions {
  private static final System.Logger LOG = System.getLogger("dev.wiggle.worker");
  private static final long NEGATIVE_TTL_NANOS = TimeUnit.SECONDS.toNanos(10);

  private record Entry(CompletableFuture<Graph> graph, long at) {}

  private final Rpc rpc;
  private final Map<String, Entry> byVersion = new ConcurrentHashMap<>();

  Definitions(Rpc rpc) {
    this.rpc = rpc;
  }

  /** The graph of {@code flow} at {@code version}, or null when it cannot be had right now. */
  Graph get(String flow, String version) {
    long now = System.nanoTime();
    CompletableFuture<Graph> mine = new CompletableFuture<>();
    Entry e = byVersion.compute(version, (k, old) -> {
      if (old == null) {
        return new Entry(mine, now);
      }
      boolean failed = old.graph().isDone() && old.graph().getNow(null) == null;
      return failed && now - old.at() > NEGATIVE_TTL_NANOS ? new Entry(mine, now) : old;
    });
    if (e.graph() == mine) {
      mine.complete(fetch(flow, version));
    }
    try {
      return e.graph().get();
    } catch (InterruptedException ie) {
      Thread.currentThread().interrupt();
      return null;
    } catch (ExecutionException ee) {
      return null;
    }
  }

  private Graph fetch(String flow, String version) {
    Definition def;
    try {
      def = rpc.call(WiggleRpc.GET_DEFINITION,
          GetDefinitionRequest.newBuilder().setName(flow).setVersion(version).build(), 0, 5_000);
    } catch (RpcException e) {
      LOG.log(Level.WARNING, "cannot fetch definition " + flow + " " + version
          + "; running its tasks in SERVER mode: " + e.getMessage());
      return null;
    }
    try {
      Graph g = GraphParser.parse(def.getGraph().toByteArray());
      if (!g.version().equals(version)) {
        // The server handed us other bytes than the pinned version: never chain on them.
        LOG.log(Level.WARNING, "definition " + flow + " " + version + " hashes to " + g.version()
            + "; running its tasks in SERVER mode");
        return null;
      }
      return g;
    } catch (GraphException e) {
      LOG.log(Level.WARNING, "cannot read definition " + flow + " " + version
          + "; running its tasks in SERVER mode: " + e.getMessage());
      return null;
    }
  }
}
