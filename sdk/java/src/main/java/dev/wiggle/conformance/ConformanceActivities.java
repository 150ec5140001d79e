package dev.wiggle.conformance;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.wiggle.worker.Activity;
import dev.wiggle.worker.NonRetryableException;
import dev.wiggle.worker.PredicateActivity;
import dev.wiggle.worker.StepInfo;
import dev.wiggle.worker.Worker;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The conformance activities of spec/conformance/ACTIVITIES.md. Each is a pure function of the
 * context and of the step's node id and attempt, and computes what the Python implementation
 * (wiggle/conformance) does, so the corpus cannot tell the two workers apart: integers are exact
 * at any size, and arithmetic on a number with a fraction is double arithmetic, as in Python.
 */
public final class ConformanceActivities {
  private static final JsonNodeFactory F = JsonNodeFactory.withExactBigDecimals(true);

  private ConformanceActivities() {}

  /** Every task activity by name (combines and the await apply included). */
  public static Map<String, Activity> tasks() {
    Map<String, Activity> m = new LinkedHashMap<>();
    m.put("noop", (ctx, s) -> ctx);
    m.put("append", (ctx, s) -> append(obj(ctx, "append"), s));
    m.put("inc", (ctx, s) -> inc(obj(ctx, "inc"), "n"));
    m.put("inc_m", (ctx, s) -> inc(obj(ctx, "inc_m"), "m"));
    m.put("zero", (ctx, s) -> obj(ctx, "zero").put("n", 0));
    m.put("double", (ctx, s) -> twice(ctx));
    m.put("fail_times", ConformanceActivities::failTimes);
    m.put("fail_always", (ctx, s) -> {
      throw new RuntimeException("failure " + s.nodeId() + " attempt " + s.attempt());
    });
    m.put("fail_fatal", (ctx, s) -> {
      throw new NonRetryableException("fatal " + s.nodeId());
    });
    m.put("hold", ConformanceActivities::hold);
    m.put("merge_results", (ctx, s) -> mergeResults(ctx));
    m.put("sum_results", (ctx, s) -> sumResults(ctx));
    m.put("apply_signal", (ctx, s) -> applySignal(ctx));
    m.put("grow", (ctx, s) -> grow(obj(ctx, "grow")));
    m.put("nest", (ctx, s) -> nest(ctx));
    return m;
  }

  /** Every predicate activity by name. */
  public static Map<String, PredicateActivity> predicates() {
    Map<String, PredicateActivity> m = new LinkedHashMap<>();
    m.put("is_true", (ctx, s) -> predObj(ctx).path(s.nodeId()).isBoolean()
        && predObj(ctx).get(s.nodeId()).booleanValue());
    m.put("lt", (ctx, s) -> integer(predObj(ctx).get("n")).compareTo(integer(predObj(ctx).get("limit"))) < 0);
    m.put("lt_m", (ctx, s) -> integer(predObj(ctx).get("m")).compareTo(integer(predObj(ctx).get("limit_m"))) < 0);
    m.put("is_even", (ctx, s) -> ctx.isIntegralNumber() && !ctx.bigIntegerValue().testBit(0));
    return m;
  }

  /** Binds every conformance activity, each writing its trace line first. */
  public static Worker.Builder register(Worker.Builder b) {
    tasks().forEach((name, fn) -> b.register(name, (ctx, s) -> {
      Trace.write(name, s);
      return fn.execute(ctx, s);
    }));
    predicates().forEach((name, fn) -> b.registerPredicate(name, (ctx, s) -> {
      Trace.write(name, s);
      return fn.test(ctx, s);
    }));
    return b;
  }

  /** A shallow copy of ctx, which must be an object (else a non-retryable failure). */
  private static ObjectNode obj(JsonNode ctx, String activity) {
    if (ctx == null || !ctx.isObject()) {
      throw new NonRetryableException("conformance: " + activity + " needs an object");
    }
    ObjectNode copy = F.objectNode();
    ctx.fields().forEachRemaining(e -> copy.set(e.getKey(), e.getValue()));
    return copy;
  }

  /** A predicate reads anything but an object as an empty object. */
  private static JsonNode predObj(JsonNode ctx) {
    return ctx != null && ctx.isObject() ? ctx : F.objectNode();
  }

  /**
   * A field read as a count: an integer within the signed 64-bit range, else 0 ({@code 4.0},
   * {@code "5"}, {@code true} and larger integers are no counts).
   */
  private static BigInteger integer(JsonNode v) {
    return v != null && v.isIntegralNumber() && v.canConvertToLong()
        ? v.bigIntegerValue() : BigInteger.ZERO;
  }

  private static ObjectNode grow(ObjectNode c) {
    long n = integer(c.get("grow_bytes")).longValue();
    return c.put("blob", "x".repeat((int) Math.max(0, Math.min(n, Integer.MAX_VALUE - 8))));
  }

  private static JsonNode nest(JsonNode ctx) {
    long depth = 1;
    if (ctx != null && ctx.isObject() && ctx.has("nest_depth")) {
      depth = integer(ctx.get("nest_depth")).longValue();
    }
    JsonNode out = ctx;
    for (long i = 0; i < depth; i++) {
      out = F.arrayNode().add(out);
    }
    return out;
  }

  private static ObjectNode append(ObjectNode c, StepInfo s) {
    ArrayNode trail = F.arrayNode();
    JsonNode old = c.get("trail");
    if (old != null && old.isArray()) {
      trail.addAll((ArrayNode) old);
    }
    trail.add(s.nodeId());
    return c.set("trail", trail);
  }

  private static ObjectNode inc(ObjectNode c, String key) {
    return c.set(key, F.numberNode(integer(c.get(key)).add(BigInteger.ONE)));
  }

  private static JsonNode twice(JsonNode ctx) {
    if (ctx == null || !ctx.isNumber()) {
      throw new NonRetryableException("conformance: double needs a number");
    }
    if (ctx.isIntegralNumber()) {
      return F.numberNode(ctx.bigIntegerValue().shiftLeft(1));
    }
    return F.numberNode(2 * ctx.doubleValue());
  }

  private static JsonNode failTimes(JsonNode ctx, StepInfo s) {
    ObjectNode c = obj(ctx, "fail_times");
    JsonNode plan = c.get("fail_times");
    BigInteger k = plan != null && plan.isObject() ? integer(plan.get(s.nodeId())) : BigInteger.ZERO;
    if (BigInteger.valueOf(s.attempt()).compareTo(k) <= 0) {
      throw new RuntimeException("planned failure " + s.nodeId() + " attempt " + s.attempt());
    }
    return append(c, s);
  }

  private static JsonNode hold(JsonNode ctx, StepInfo s) throws InterruptedException {
    ObjectNode c = obj(ctx, "hold");
    long ms = c.has("hold_ms") ? integer(c.get("hold_ms")).longValue() : 300;
    // Slices, so a lost lease (the instance cancelled, say) is noticed within 50 ms; until a
    // deadline, so each slice's oversleep on a loaded machine does not add up.
    long until = System.nanoTime() + ms * 1_000_000L;
    for (long left = until - System.nanoTime(); left > 0; left = until - System.nanoTime()) {
      if (s.isCancelled()) {
        throw new InterruptedException("the lease was lost");
      }
      Thread.sleep(Math.min((left + 999_999) / 1_000_000, 50));
    }
    return append(c, s);
  }

  private static ObjectNode mergeResults(JsonNode ctx) {
    ObjectNode in = obj(ctx, "merge_results");
    ObjectNode c = obj(in.get("context"), "merge_results");
    JsonNode results = in.get("results");
    return c.set("results", results == null ? NullNode.getInstance() : results);
  }

  private static ObjectNode sumResults(JsonNode ctx) {
    ObjectNode in = obj(ctx, "sum_results");
    ObjectNode c = obj(in.get("context"), "sum_results");
    JsonNode results = in.get("results");
    List<JsonNode> values = new ArrayList<>();
    if (results != null && (results.isObject() || results.isArray())) {
      for (Iterator<JsonNode> it = results.elements(); it.hasNext(); ) {
        values.add(it.next());
      }
    }
    BigInteger ints = BigInteger.ZERO;
    Double floats = null; // Python: int + float is float, and stays float
    for (JsonNode r : values) {
      if (r.isIntegralNumber()) {
        if (floats == null) {
          ints = ints.add(r.bigIntegerValue());
        } else {
          floats += r.doubleValue();
        }
      } else if (r.isNumber()) {
        floats = (floats == null ? ints.doubleValue() : floats) + r.doubleValue();
      } else if (r.isObject()) {
        BigInteger n = integer(r.get("n"));
        if (floats == null) {
          ints = ints.add(n);
        } else {
          floats += n.doubleValue();
        }
      }
    }
    return c.set("sum", floats == null ? F.numberNode(ints) : F.numberNode(floats));
  }

  private static ObjectNode applySignal(JsonNode ctx) {
    ObjectNode in = obj(ctx, "apply_signal");
    ObjectNode c = obj(in.get("context"), "apply_signal");
    ArrayNode signals = F.arrayNode();
    JsonNode old = c.get("signals");
    if (old != null && old.isArray()) {
      signals.addAll((ArrayNode) old);
    }
    JsonNode signal = in.get("signal");
    signals.add(signal == null ? NullNode.getInstance() : signal);
    return c.set("signals", signals);
  }
}
