package dev.wiggle.expressions;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.cel.bundle.Cel;
import dev.cel.bundle.CelFactory;
import dev.cel.common.types.SimpleType;
import dev.cel.extensions.CelExtensions;
import dev.cel.runtime.CelRuntime;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The SDK's contains, indexOf, lastIndexOf and split (Search) give what cel-java's own give, with
 * characters of one and two UTF-16 chars and unpaired surrogates; except where the profile
 * follows cel-spec and the other implementations (see Search), and where cel-java's contains and
 * split, which compare chars, split a surrogate pair.
 */
class SearchTest {
  private static final List<String> TEXTS =
      List.of("", "a", "abc", "abcabc", "hello mellow", "aaaa", "héllo wörld", "😀a😀b😀",
          "\ud83da\ude00", "a\ud83d\ud83d\ude00\ude00", "\ude00😀\ud83d");
  private static final List<String> SUBS =
      List.of("", "a", "b", "ab", "aa", "ello", "ö", "😀", "😀b", "a😀", "\ud83d", "\ude00",
          "\ude00\ud83d", "abcabcabc");

  private static final Cel LIBRARY =
      CelFactory.standardCelBuilder()
          .addVar("t", SimpleType.STRING)
          .addVar("s", SimpleType.STRING)
          .addVar("o", SimpleType.INT)
          .addCompilerLibraries(CelExtensions.strings())
          .addRuntimeLibraries(CelExtensions.strings())
          .build();

  private static final Map<String, CelRuntime.Program> PROGRAMS = new HashMap<>();

  /** What the library's own function gives. */
  private static Object library(String source, String t, String s, long o) throws Exception {
    CelRuntime.Program p = PROGRAMS.get(source);
    if (p == null) {
      p = LIBRARY.createProgram(LIBRARY.compile(source).getAst());
      PROGRAMS.put(source, p);
    }
    return p.eval(Map.of("t", t, "s", s, "o", o));
  }

  private static boolean hasSurrogate(String s) {
    return s.codePoints().anyMatch(c -> Character.getType(c) == Character.SURROGATE);
  }

  // For every offset in and around each string: one outside 0..size fails, one at the end is
  // allowed (lastIndexOf from there searches the whole string), and so is a search of the empty
  // string; contains finds what indexOf finds.
  @Test
  void searchIsTheLibrarysWithTheProfilesOffsets() throws Exception {
    Expression contains = Expression.compile("ctx.t.contains(ctx.s)");
    Expression indexOf = Expression.compile("ctx.t.indexOf(ctx.s)");
    Expression lastIndexOf = Expression.compile("ctx.t.lastIndexOf(ctx.s)");
    Expression indexOfFrom = Expression.compile("ctx.t.indexOf(ctx.s, ctx.o)");
    Expression lastIndexOfFrom = Expression.compile("ctx.t.lastIndexOf(ctx.s, ctx.o)");
    for (String t : TEXTS) {
      long size = t.codePointCount(0, t.length());
      for (String s : SUBS) {
        String at = "t '" + t + "', s '" + s + "'";
        Map<String, Object> ctx = Map.of("t", t, "s", s);
        // cel-java's indexOf refuses offset 0 of the empty string.
        Object first = t.isEmpty() ? (s.isEmpty() ? 0L : -1L) : library("t.indexOf(s)", t, s, 0);
        assertEquals(first, indexOf.evaluate(ctx, null), at);
        assertEquals((Long) first >= 0, contains.evaluate(ctx, null), at);
        Object last = library("t.lastIndexOf(s)", t, s, 0);
        assertEquals(last, lastIndexOf.evaluate(ctx, null), at);
        for (long o = -2; o <= size + 2; o++) {
          Map<String, Object> from = Map.of("t", t, "s", s, "o", o);
          if (o < 0 || o > size) {
            for (Expression e : List.of(indexOfFrom, lastIndexOfFrom)) {
              EvaluationException err =
                  assertThrows(EvaluationException.class, () -> e.evaluate(from, null));
              assertEquals("out_of_range", err.kind(), at + ", o " + o);
            }
            continue;
          }
          Object want = o < size ? library("t.indexOf(s, o)", t, s, o) : s.isEmpty() ? o : -1L;
          assertEquals(want, indexOfFrom.evaluate(from, null), at + ", o " + o);
          want = o < size ? library("t.lastIndexOf(s, o)", t, s, o) : s.isEmpty() ? o : last;
          assertEquals(want, lastIndexOfFrom.evaluate(from, null), at + ", o " + o);
        }
      }
    }
  }

  // For every count from -2 to 6: a negative one splits at every separator, and the empty string
  // splits into one empty part (none with a count of 0).
  @Test
  void splitIsTheLibrarys() throws Exception {
    Expression split = Expression.compile("ctx.t.split(ctx.s, ctx.o)");
    for (String t : TEXTS) {
      for (String s : SUBS) {
        if (hasSurrogate(t) || hasSurrogate(s)) {
          continue;
        }
        for (long o = -2; o <= 6; o++) {
          Object want =
              t.isEmpty() ? (o == 0 ? List.of() : List.of(""))
                  : library(o < 0 ? "t.split(s)" : "t.split(s, o)", t, s, o);
          Map<String, Object> ctx = Map.of("t", t, "s", s, "o", o);
          assertEquals(want, split.evaluate(ctx, null), "t '" + t + "', s '" + s + "', o " + o);
        }
      }
    }
    Expression whole = Expression.compile("ctx.t.split(ctx.s)");
    assertEquals(List.of("😀a😀"), whole.evaluate(Map.of("t", "😀a😀", "s", "\ud83d"), null));
    assertEquals(List.of("a", "\ud83d"), whole.evaluate(Map.of("t", "a\ude00\ud83d", "s", "\ude00"), null));
  }
}
