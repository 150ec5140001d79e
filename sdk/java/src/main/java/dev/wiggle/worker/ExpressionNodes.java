package dev.wiggle.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.wiggle.expressions.EvaluationException;
import dev.wiggle.expressions.Expression;
import dev.wiggle.expressions.InvalidExpressionException;
import dev.wiggle.graph.Kind;
import dev.wiggle.graph.Node;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Evaluates a graph's expression nodes ({@code condition}, {@code set}) in a local run
 * (docs/worker-protocol.md, "Expression nodes in a run"), the same rule as
 * wiggle/expressions/_nodes.py: a condition's boolean, a set's new context, or the node's
 * non-retryable failure ({@code error_type} {@value #ERROR_TYPE}, a message that begins with the
 * error kind). Compiled expressions are cached by source, so each is compiled once per process.
 */
final class ExpressionNodes {
  /** The {@code error_type} of an expression node's failure, in every language. */
  static final String ERROR_TYPE = "ExpressionError";

  /** How many compiled expressions the cache keeps before it starts afresh. */
  static final int CACHE_SIZE = 4_096;

  /** Source to its Expression, or to the InvalidExpressionException compiling it gave. */
  private static final Map<String, Object> CACHE = new ConcurrentHashMap<>();

  private ExpressionNodes() {}

  /**
   * What an expression node gave.
   *
   * @param outcome a predicate (condition), a context (set) or a failure
   * @param context a set's new context as a tree (null otherwise), so a chain need not re-read it
   */
  record Result(Outcome outcome, JsonNode context) {}

  /**
   * The value of {@code node} (a condition or set) for the context {@code ctx} of the instance
   * {@code {"id": ..., "flow": ...}}; a set's result is held to the server's payload limit like
   * any step result.
   */
  static Result evaluate(
      Node node, JsonNode ctx, Map<String, Object> instance, long maxPayloadBytes) {
    try {
      if (node.kind() == Kind.CONDITION) {
        boolean value = compiled(node.expression()).condition(ctx, instance);
        return new Result(Outcome.ofPredicate(value), null);
      }
      if (node.kind() != Kind.SET) {
        throw new IllegalArgumentException("node '" + node.id() + "' is not an expression node");
      }
      if (ctx == null || !ctx.isObject()) {
        throw new EvaluationException("", "type_mismatch",
            "set '" + node.id() + "' needs an object context; the context is " + what(ctx));
      }
      // Every expression sees the same incoming context; none sees another's result.
      Map<String, JsonNode> values = new LinkedHashMap<>();
      for (Map.Entry<String, String> e : node.values().entrySet()) {
        values.put(e.getKey(), tree(compiled(e.getValue()).evaluate(ctx, instance)));
      }
      ObjectNode next = ((ObjectNode) ctx).deepCopy();
      values.forEach(next::set);
      Outcome checked = Handlers.checked(node.id(), next, maxPayloadBytes);
      return new Result(checked, checked.failure() == null ? next : null);
    } catch (EvaluationException e) {
      return new Result(Outcome.failed(message(e), true, ERROR_TYPE), null);
    }
  }

  /** {@code <kind>: <detail> (expression '<source>')}: it starts with the kind in every language. */
  static String message(EvaluationException e) {
    if (e.source() == null || e.source().isEmpty()) {
      return e.kind() + ": " + e.detail();
    }
    return e.kind() + ": " + e.detail() + " (expression " + quoted(e.source()) + ")";
  }

  /**
   * The compiled expression of {@code source}, compiled once; a stored graph whose expression
   * does not compile fails its node ({@code invalid_argument}).
   */
  static Expression compiled(String source) {
    Object found = CACHE.get(source);
    if (found == null) {
      try {
        found = Expression.compile(source);
      } catch (InvalidExpressionException e) {
        found = e;
      }
      if (CACHE.size() >= CACHE_SIZE) {
        CACHE.clear();
      }
      Object raced = CACHE.putIfAbsent(source, found);
      if (raced != null) {
        found = raced;
      }
    }
    if (found instanceof InvalidExpressionException e) {
      // A graph the compiler would refuse (written by hand, or by an older profile).
      throw new EvaluationException(
          source, "invalid_argument", "does not compile: " + e.getMessage());
    }
    return (Expression) found;
  }

  /** How many compiled expressions the cache holds (for tests). */
  static int cached() {
    return CACHE.size();
  }

  /** A JSON-ready value of {@link Expression#evaluate} as a tree; numbers keep their value. */
  private static JsonNode tree(Object value) {
    if (value == null) {
      return NullNode.getInstance();
    }
    return Json.mapper().valueToTree(value);
  }

  private static String what(JsonNode ctx) {
    if (ctx == null || ctx.isNull() || ctx.isMissingNode()) {
      return "null";
    }
    if (ctx.isArray()) {
      return "a list";
    }
    if (ctx.isTextual()) {
      return "a string";
    }
    if (ctx.isBoolean()) {
      return "a boolean";
    }
    return "a number";
  }

  /** The source as Python's repr quotes it: single quotes unless it holds one and no double. */
  private static String quoted(String s) {
    char q = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
    StringBuilder b = new StringBuilder().append(q);
    for (char c : s.toCharArray()) {
      if (c == '\\' || c == q) {
        b.append('\\');
      }
      b.append(c == '\n' ? "\\n" : String.valueOf(c));
    }
    return b.append(q).toString();
  }
}
