package dev.wiggle.expressions;

import com.google.common.collect.ImmutableList;
import dev.cel.common.CelFunctionDecl;
import dev.cel.common.CelOverloadDecl;
import dev.cel.common.ast.CelConstant;
import dev.cel.common.ast.CelExpr;
import dev.cel.common.types.ListType;
import dev.cel.common.types.SimpleType;
import dev.cel.runtime.CelEvaluationListener;
import dev.cel.runtime.CelFunctionBinding;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The profile's run-time limits (docs/expressions.md, "Limits"), kept by the evaluation listener
 * that cel-java calls with the value of every node it evaluates:
 * <ul>
 *   <li>the size budget: what one evaluation makes (a string by its code points, a list by its
 *       elements, a map by its entries) counts against {@link #SIZE_BUDGET}. {@link #plan} finds,
 *       in the checked tree, the nodes whose values the rules count. {@code replace} and
 *       {@code join} are this class's own functions, in place of the strings extension's, and
 *       count their result before they make it;
 *   <li>the iteration budget: each evaluation of a comprehension's loop condition, once per
 *       element it visits, counts against {@link Expression#ITERATION_BUDGET};
 *   <li>the time limit: the listener reads the clock at each comprehension step and every 16th
 *       node, so an evaluation ends at most 16 nodes' work past it.
 * </ul>
 * Past a limit the evaluation ends with {@link Stop}.
 */
final class Sizes {
  static final int SIZE_BUDGET = 4_194_304;

  static final long TIME_LIMIT_NANOS = 1_000_000_000L;

  /**
   * The limit evaluations run under: {@link #TIME_LIMIT_NANOS}, but in this package's tests,
   * which set a longer one for the evaluations that are not about it. Nothing else sets it.
   */
  static volatile long timeLimitNanos = TIME_LIMIT_NANOS;

  static final String OVER =
      "the evaluation made more than " + SIZE_BUDGET + " characters, elements and entries";

  static final String OVER_ITERATIONS =
      "more than " + Expression.ITERATION_BUDGET + " comprehension iterations in one evaluation";

  static final String OVER_TIME = "the evaluation ran longer than 1 second";

  /**
   * Ends an evaluation past a limit. An Error, not an exception: cel-java turns every exception
   * that the listener or a function throws into a CEL error, which {@code ||}, {@code &&} and
   * {@code ?:} may set aside, and after which a comprehension takes its next step.
   */
  static final class Stop extends Error {
    Stop(String detail) {
      super(detail, null, false, false);
    }
  }

  /** What the evaluation under way on this thread has spent (cel-java evaluates on the caller's
   * thread). */
  private static final class Spent {
    long start; // System.nanoTime() when it began
    long made;
    int iterations;
    int nodes;
  }

  private static final ThreadLocal<Spent> SPENT = ThreadLocal.withInitial(Spent::new);

  static void count(long size) {
    Spent s = SPENT.get();
    s.made += size;
    if (s.made > SIZE_BUDGET) {
      throw new Stop(OVER);
    }
  }

  static int codePoints(String s) {
    return s.codePointCount(0, s.length());
  }

  static long sizeOf(Object v) {
    if (v instanceof String s) {
      return codePoints(s);
    }
    if (v instanceof List<?> l) {
      return l.size();
    }
    if (v instanceof Map<?, ?> m) {
      return m.size();
    }
    return 0;
  }

  static long innerStrings(Object v) {
    long n = 0;
    if (v instanceof List<?> l) {
      for (Object e : l) {
        n += e instanceof String s ? codePoints(s) : 0;
      }
    } else if (v instanceof Map<?, ?> m) {
      for (Map.Entry<?, ?> e : m.entrySet()) {
        n += e.getKey() instanceof String s ? codePoints(s) : 0;
        n += e.getValue() instanceof String s ? codePoints(s) : 0;
      }
    }
    return n;
  }

  enum Counting {
    SIZE, // a string, list or map: its size
    STRINGS, // a list or map with its strings: its size and theirs
    STATIC, // a constant literal: its entries, known from the text
    STEP // a comprehension's loop condition: one iteration
  }

  /** What the limits count at each node of one checked tree, by id. */
  record Plan(Map<Long, Counting> what, Map<Long, Integer> entries) {
    /** The listener of one evaluation on this thread, which starts now. */
    CelEvaluationListener listener() {
      Spent s = SPENT.get();
      s.start = System.nanoTime();
      s.made = 0;
      s.iterations = 0;
      s.nodes = 0;
      return (expr, value) -> {
        Counting c = what.get(expr.id());
        // The clock at every comprehension step and every 16th node: at every node, it took 15%
        // of an evaluation of a small expression.
        if ((c == Counting.STEP || (++s.nodes & 15) == 0)
            && System.nanoTime() - s.start > timeLimitNanos) {
          throw new Stop(OVER_TIME);
        }
        if (c == null) {
          return;
        }
        switch (c) {
          case STATIC -> count(entries.get(expr.id()));
          case SIZE -> count(sizeOf(value));
          case STRINGS -> count(sizeOf(value) + innerStrings(value));
          case STEP -> {
            if (++s.iterations > Expression.ITERATION_BUDGET) {
              throw new Stop(OVER_ITERATIONS);
            }
          }
        }
      };
    }
  }

  private static final Set<String> MAKERS = Set.of("lowerAscii", "upperAscii", "substring", "trim", "split");

  /** The nodes of {@code root} the rules count: the same rules as wiggle/expressions/_sizing.py. */
  static Plan plan(CelExpr root, Map<Long, CelExpr> macroCalls) {
    Map<Long, String> macros = new HashMap<>();
    macroCalls.forEach(
        (id, call) -> {
          if (call.getKind() == CelExpr.ExprKind.Kind.CALL) {
            macros.put(id, call.call().function());
          }
        });
    Plan p = new Plan(new HashMap<>(), new HashMap<>());
    visit(p, root, macros, null, false);
    return p;
  }

  private record Macro(String accu, String name) {}

  private static void visit(Plan p, CelExpr e, Map<Long, String> macros, Macro in, boolean chainLeft) {
    switch (e.getKind()) {
      case SELECT -> visit(p, e.select().operand(), macros, in, false);
      case CALL -> {
        CelExpr.CelCall call = e.call();
        List<CelExpr> args = call.args();
        String name = call.function();
        if (name.equals("_+_") && in != null && args.size() == 2
            && args.get(0).getKind() == CelExpr.ExprKind.Kind.IDENT
            && args.get(0).ident().name().equals(in.accu())
            && args.get(1).getKind() == CelExpr.ExprKind.Kind.LIST) {
          // A map's or filter's own step, `accu + [element]`: the macro's result counts.
          for (CelExpr made : args.get(1).list().elements()) {
            visit(p, made, macros, in, false);
          }
          return;
        }
        call.target().ifPresent(t -> visit(p, t, macros, in, false));
        for (int i = 0; i < args.size(); i++) {
          visit(p, args.get(i), macros, in, name.equals("_+_") && i == 0);
        }
        if (name.equals("_+_") && !chainLeft) {
          if (!chainHasNumber(e)) {
            p.what().put(e.id(), Counting.SIZE);
          }
        } else if (call.target().isPresent() && MAKERS.contains(name)) {
          p.what().put(e.id(), Counting.SIZE);
        }
      }
      case LIST, MAP -> {
        Integer constant = constantEntries(e);
        if (constant != null) {
          p.what().put(e.id(), Counting.STATIC);
          p.entries().put(e.id(), constant);
          return;
        }
        if (e.getKind() == CelExpr.ExprKind.Kind.LIST) {
          for (CelExpr el : e.list().elements()) {
            visit(p, el, macros, in, false);
          }
        } else {
          for (CelExpr.CelMap.Entry entry : e.map().entries()) {
            visit(p, entry.key(), macros, in, false);
            visit(p, entry.value(), macros, in, false);
          }
        }
        p.what().put(e.id(), Counting.STRINGS);
      }
      case COMPREHENSION -> {
        CelExpr.CelComprehension c = e.comprehension();
        String name = macros.get(e.id());
        Macro inner = new Macro(c.accuVar(), name);
        visit(p, c.iterRange(), macros, in, false);
        visit(p, c.loopCondition(), macros, inner, false);
        p.what().put(c.loopCondition().id(), Counting.STEP);
        visit(p, c.loopStep(), macros, inner, false);
        visit(p, c.result(), macros, inner, false);
        if ("map".equals(name)) {
          p.what().put(e.id(), Counting.STRINGS); // each string it makes counts too
        } else if ("filter".equals(name)) {
          p.what().put(e.id(), Counting.SIZE);
        }
      }
      default -> {}
    }
  }

  private static boolean chainHasNumber(CelExpr e) {
    while (e.getKind() == CelExpr.ExprKind.Kind.CALL && e.call().function().equals("_+_")
        && e.call().args().size() == 2) {
      if (isNumber(e.call().args().get(1))) {
        return true;
      }
      e = e.call().args().get(0);
    }
    return isNumber(e);
  }

  private static boolean isNumber(CelExpr e) {
    if (e.getKind() != CelExpr.ExprKind.Kind.CONSTANT) {
      return false;
    }
    CelConstant.Kind k = e.constant().getKind();
    return k == CelConstant.Kind.INT64_VALUE || k == CelConstant.Kind.UINT64_VALUE
        || k == CelConstant.Kind.DOUBLE_VALUE;
  }

  /** A literal made of literals only: its entries, its inner literals' included; else null. */
  private static Integer constantEntries(CelExpr e) {
    switch (e.getKind()) {
      case CONSTANT:
        return 0;
      case LIST: {
        int n = e.list().elements().size();
        for (CelExpr el : e.list().elements()) {
          Integer inner = constantEntries(el);
          if (inner == null) {
            return null;
          }
          n += inner;
        }
        return n;
      }
      case MAP: {
        int n = e.map().entries().size();
        for (CelExpr.CelMap.Entry entry : e.map().entries()) {
          Integer k = constantEntries(entry.key());
          Integer v = constantEntries(entry.value());
          if (k == null || v == null) {
            return null;
          }
          n += k + v;
        }
        return n;
      }
      default:
        return null;
    }
  }

  // replace and join, counted before they are made, in place of the strings extension's.

  static final List<CelFunctionDecl> DECLARATIONS =
      List.of(
          CelFunctionDecl.newFunctionDeclaration(
              "replace",
              CelOverloadDecl.newMemberOverload(
                  "string_replace_string_string", SimpleType.STRING,
                  SimpleType.STRING, SimpleType.STRING, SimpleType.STRING),
              CelOverloadDecl.newMemberOverload(
                  "string_replace_string_string_int", SimpleType.STRING,
                  SimpleType.STRING, SimpleType.STRING, SimpleType.STRING, SimpleType.INT)),
          CelFunctionDecl.newFunctionDeclaration(
              "join",
              CelOverloadDecl.newMemberOverload(
                  "list_join", SimpleType.STRING, ListType.create(SimpleType.STRING)),
              CelOverloadDecl.newMemberOverload(
                  "list_join_string", SimpleType.STRING, ListType.create(SimpleType.STRING),
                  SimpleType.STRING)));

  static final List<CelFunctionBinding> BINDINGS =
      List.of(
          CelFunctionBinding.from(
              "string_replace_string_string",
              ImmutableList.of(String.class, String.class, String.class),
              a -> replace((String) a[0], (String) a[1], (String) a[2], -1)),
          CelFunctionBinding.from(
              "string_replace_string_string_int",
              ImmutableList.of(String.class, String.class, String.class, Long.class),
              a -> replace((String) a[0], (String) a[1], (String) a[2], (Long) a[3])),
          CelFunctionBinding.from("list_join", List.class, l -> join(l, "")),
          CelFunctionBinding.from("list_join_string", List.class, String.class, Sizes::join));

  /** The first {@code limit} (all when negative) non-overlapping occurrences of {@code old}; an
   * empty {@code old} matches before every code point and at the end. */
  static String replace(String text, String old, String repl, long limit) {
    long cap = limit < 0 ? Long.MAX_VALUE : limit;
    int points = codePoints(text);
    long found = 0;
    if (old.isEmpty()) {
      found = Math.min(points + 1L, cap);
    } else {
      for (int at = next(text, old, 0); at >= 0 && found < cap;
          at = next(text, old, at + old.length())) {
        found++;
      }
    }
    count(points + found * (codePoints(repl) - codePoints(old)));
    StringBuilder out = new StringBuilder();
    if (old.isEmpty()) {
      int i = 0;
      long done = 0;
      while (i < text.length()) {
        if (done < found) {
          out.append(repl);
          done++;
        }
        int next = text.offsetByCodePoints(i, 1);
        out.append(text, i, next);
        i = next;
      }
      if (done < found) {
        out.append(repl);
      }
      return out.toString();
    }
    int from = 0;
    for (long n = 0; n < found; n++) {
      int at = next(text, old, from);
      out.append(text, from, at).append(repl);
      from = at + old.length();
    }
    return out.append(text.substring(from)).toString();
  }

  /** The next occurrence of old from char from, in linear time (String.indexOf's is not). */
  private static int next(String text, String old, int from) {
    return Search.find(text, old, from, text.length(), false);
  }

  static String join(List<?> items, String sep) throws dev.cel.runtime.CelEvaluationException {
    List<String> strings = new ArrayList<>(items.size());
    long total = 0;
    for (Object item : items) {
      if (!(item instanceof String s)) {
        throw dev.cel.runtime.CelEvaluationExceptionBuilder.newBuilder(
                "found no matching overload for 'join': the list holds a non-string")
            .build();
      }
      strings.add(s);
      total += codePoints(s);
    }
    count(total + (long) Math.max(items.size() - 1, 0) * codePoints(sep));
    return String.join(sep, strings);
  }

  /** Whether a result stays within the budget, counted deeply as it is copied out. */
  static boolean resultWithin(Object v) {
    long[] left = {SIZE_BUDGET};
    return within(v, left);
  }

  private static boolean within(Object v, long[] left) {
    left[0] -= sizeOf(v);
    if (left[0] < 0) {
      return false;
    }
    if (v instanceof List<?> l) {
      for (Object e : l) {
        if (!within(e, left)) {
          return false;
        }
      }
    } else if (v instanceof Map<?, ?> m) {
      for (Object e : m.values()) {
        if (!within(e, left)) {
          return false;
        }
      }
    }
    return true;
  }

  private Sizes() {}
}
