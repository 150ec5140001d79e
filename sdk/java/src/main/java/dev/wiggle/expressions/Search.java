package dev.wiggle.expressions;

import com.google.common.collect.ImmutableList;
import dev.cel.common.CelFunctionDecl;
import dev.cel.common.CelOverloadDecl;
import dev.cel.common.types.ListType;
import dev.cel.common.types.SimpleType;
import dev.cel.runtime.CelEvaluationException;
import dev.cel.runtime.CelEvaluationExceptionBuilder;
import dev.cel.runtime.CelFunctionBinding;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code contains}, {@code indexOf}, {@code lastIndexOf} and {@code split} in time linear in their
 * strings (docs/expressions.md, "The time limit"), in place of the standard library's
 * {@code contains} and the strings extension's three. Theirs try the pattern at every offset
 * (String.indexOf, Guava's Splitter): cel-java's contains took 2 minutes to search 2,000,000 a's
 * for 1,000,000 a's and a b. Here Knuth-Morris-Pratt runs on the UTF-16 chars, and only offsets
 * are counted in code points. Where cel-java's differ, these follow cel-spec and the other
 * implementations: an offset outside 0..size fails with "index out of range" (cel-java's own
 * refuses an offset at the end, and takes any offset with an empty substring); split with a
 * negative count splits at every separator (cel-java's at most as many times as the string has
 * chars), and splits the empty string into one empty part.
 */
final class Search {
  static boolean contains(String text, String sub) {
    return sub.isEmpty() || find(text, sub, 0, text.length(), false) >= 0;
  }

  /** Where sub first occurs in text at code point offset or later, or -1; an empty sub is found
   * at offset. */
  static long indexOf(String text, String sub, long offset) throws CelEvaluationException {
    int from = charIndex(text, offset);
    return sub.isEmpty() ? offset : points(text, find(text, sub, from, text.length(), false));
  }

  /** Where sub last occurs in text, or -1; an empty sub is found at the end. */
  static long lastIndexOf(String text, String sub) {
    return sub.isEmpty()
        ? Sizes.codePoints(text)
        : points(text, find(text, sub, 0, text.length(), true));
  }

  /** Where sub last occurs in text starting at code point offset or before, or -1; an empty sub
   * is found at offset. */
  static long lastIndexOf(String text, String sub, long offset) throws CelEvaluationException {
    int at = charIndex(text, offset);
    // An occurrence that starts at or before char at ends by at + sub.length().
    int to = at + Math.min(sub.length(), text.length() - at);
    return sub.isEmpty() ? offset : points(text, find(text, sub, 0, to, true));
  }

  /** At most limit parts (all when negative, none at 0); an empty separator splits between code
   * points. */
  static List<String> split(String text, String sep, long limit) {
    List<String> parts = new ArrayList<>();
    if (limit == 0) {
      return parts;
    }
    int from = 0;
    while (limit < 0 || parts.size() < limit - 1) {
      int at = sep.isEmpty()
          ? (from < text.length() ? text.offsetByCodePoints(from, 1) : -1)
          : find(text, sep, from, text.length(), false);
      if (at < 0) {
        break;
      }
      parts.add(text.substring(from, at));
      from = at + sep.length();
    }
    // The rest; split on the empty separator, only a rest that is left, or the empty string.
    if (from < text.length() || !sep.isEmpty() || parts.isEmpty()) {
      parts.add(text.substring(from));
    }
    return parts;
  }

  /**
   * The char index of the first (or, when last, the last) occurrence of sub, which is not empty,
   * within chars from..to of text, or -1. An occurrence counts only if it begins and ends between
   * code points: one half of a surrogate pair in sub (unpaired there) does not match inside a
   * pair of text.
   */
  static int find(String text, String sub, int from, int to, boolean last) {
    int m = sub.length();
    int[] border = new int[m]; // border[j]: the longest proper prefix of sub[0..j] that ends it
    for (int j = 1, k = 0; j < m; j++) {
      while (k > 0 && sub.charAt(j) != sub.charAt(k)) {
        k = border[k - 1];
      }
      if (sub.charAt(j) == sub.charAt(k)) {
        k++;
      }
      border[j] = k;
    }
    int found = -1;
    for (int i = from, k = 0; i < to; i++) {
      while (k > 0 && text.charAt(i) != sub.charAt(k)) {
        k = border[k - 1];
      }
      if (text.charAt(i) == sub.charAt(k)) {
        k++;
      }
      if (k == m) {
        int start = i + 1 - m;
        if (!splitsPair(text, start) && !splitsPair(text, i + 1)) {
          if (!last) {
            return start;
          }
          found = start;
        }
        k = border[k - 1];
      }
    }
    return found;
  }

  private static boolean splitsPair(String text, int i) {
    return i > 0 && i < text.length()
        && Character.isHighSurrogate(text.charAt(i - 1))
        && Character.isLowSurrogate(text.charAt(i));
  }

  /** The char at which code point offset starts in text; the offset must be within 0..size. */
  private static int charIndex(String text, long offset) throws CelEvaluationException {
    if (offset < 0 || offset > Sizes.codePoints(text)) {
      throw CelEvaluationExceptionBuilder.newBuilder("index out of range: %d", offset).build();
    }
    return text.offsetByCodePoints(0, (int) offset);
  }

  /** Char index i of text in code points, or -1 for -1. */
  private static long points(String text, int i) {
    return i < 0 ? -1 : text.codePointCount(0, i);
  }

  /**
   * indexOf, lastIndexOf and split with the strings extension's overloads, which Expression leaves
   * out; contains with an overload of its own, which hides the standard library's: cel-java's
   * checker takes a function the environment declares in place of the standard one (its runtime
   * would refuse a second binding of the standard overload).
   */
  static final List<CelFunctionDecl> DECLARATIONS =
      List.of(
          CelFunctionDecl.newFunctionDeclaration(
              "contains",
              CelOverloadDecl.newMemberOverload(
                  "wiggle_contains_string", SimpleType.BOOL, SimpleType.STRING, SimpleType.STRING)),
          CelFunctionDecl.newFunctionDeclaration(
              "indexOf",
              CelOverloadDecl.newMemberOverload(
                  "string_index_of_string", SimpleType.INT, SimpleType.STRING, SimpleType.STRING),
              CelOverloadDecl.newMemberOverload(
                  "string_index_of_string_int", SimpleType.INT,
                  SimpleType.STRING, SimpleType.STRING, SimpleType.INT)),
          CelFunctionDecl.newFunctionDeclaration(
              "lastIndexOf",
              CelOverloadDecl.newMemberOverload(
                  "string_last_index_of_string", SimpleType.INT,
                  SimpleType.STRING, SimpleType.STRING),
              CelOverloadDecl.newMemberOverload(
                  "string_last_index_of_string_int", SimpleType.INT,
                  SimpleType.STRING, SimpleType.STRING, SimpleType.INT)),
          CelFunctionDecl.newFunctionDeclaration(
              "split",
              CelOverloadDecl.newMemberOverload(
                  "string_split_string", ListType.create(SimpleType.STRING),
                  SimpleType.STRING, SimpleType.STRING),
              CelOverloadDecl.newMemberOverload(
                  "string_split_string_int", ListType.create(SimpleType.STRING),
                  SimpleType.STRING, SimpleType.STRING, SimpleType.INT)));

  static final List<CelFunctionBinding> BINDINGS =
      List.of(
          CelFunctionBinding.from(
              "wiggle_contains_string", String.class, String.class, Search::contains),
          CelFunctionBinding.from(
              "string_index_of_string", String.class, String.class, (t, s) -> indexOf(t, s, 0)),
          CelFunctionBinding.from(
              "string_index_of_string_int",
              ImmutableList.of(String.class, String.class, Long.class),
              a -> indexOf((String) a[0], (String) a[1], (Long) a[2])),
          CelFunctionBinding.from(
              "string_last_index_of_string", String.class, String.class, Search::lastIndexOf),
          CelFunctionBinding.from(
              "string_last_index_of_string_int",
              ImmutableList.of(String.class, String.class, Long.class),
              a -> lastIndexOf((String) a[0], (String) a[1], (Long) a[2])),
          CelFunctionBinding.from(
              "string_split_string", String.class, String.class, (t, s) -> split(t, s, -1)),
          CelFunctionBinding.from(
              "string_split_string_int",
              ImmutableList.of(String.class, String.class, Long.class),
              a -> split((String) a[0], (String) a[1], (Long) a[2])));

  private Search() {}
}
