package dev.wiggle.expressions;

import dev.cel.bundle.Cel;
import dev.cel.bundle.CelFactory;
import dev.cel.common.CelAbstractSyntaxTree;
import dev.cel.common.CelErrorCode;
import dev.cel.common.CelOptions;
import dev.cel.common.CelValidationException;
import dev.cel.common.types.MapType;
import dev.cel.common.types.SimpleType;
import dev.cel.extensions.CelExtensions;
import dev.cel.parser.CelStandardMacro;
import dev.cel.runtime.CelEvaluationException;
import dev.cel.runtime.CelRuntime;
import dev.cel.extensions.CelStringExtensions;
import java.util.EnumSet;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * A CEL expression under the Wiggle profile (docs/expressions.md), on cel-java: {@code ctx} is
 * declared {@code dyn} and {@code instance} {@code map(string, dyn)}, with CEL's standard library
 * and its strings and math extensions. {@link #compile} parses and type-checks once;
 * {@link #evaluate} may then run any number of times, from any thread.
 *
 * <p>The profile's run-time limits (docs/expressions.md, "Limits"), each of which fails an
 * evaluation with invalid_argument, are kept by {@link Sizes}: {@link #ITERATION_BUDGET}
 * comprehension iterations per evaluation, across all its comprehensions; the size budget; the
 * time limit of one second. cel-java itself gets {@link #MAX_PARSE_RECURSION_DEPTH} levels of
 * parser recursion (the profile allows 24 brackets).
 */
public final class Expression {
  /**
   * The profile's iteration budget. Not cel-java's comprehensionMaxIterations, whose spent budget
   * is a CEL error that {@code ||} may set aside.
   */
  public static final int ITERATION_BUDGET = 10_000;

  /** cel-java's maxParseRecursionDepth (its default is 250). */
  public static final int MAX_PARSE_RECURSION_DEPTH = 100;

  static final CelOptions OPTIONS =
      CelOptions.current()
          .maxParseRecursionDepth(MAX_PARSE_RECURSION_DEPTH)
          .build();

  /**
   * The strings extension but replace and join, which {@link Sizes} counts before they make, and
   * indexOf, lastIndexOf and split, which {@link Search} makes linear.
   */
  private static final CelStringExtensions STRINGS =
      CelExtensions.strings(
          EnumSet.complementOf(
              EnumSet.of(
                  CelStringExtensions.Function.REPLACE, CelStringExtensions.Function.JOIN,
                  CelStringExtensions.Function.INDEX_OF, CelStringExtensions.Function.LAST_INDEX_OF,
                  CelStringExtensions.Function.SPLIT)));

  private static final Cel CEL =
      CelFactory.standardCelBuilder()
          .setOptions(OPTIONS)
          .setStandardMacros(CelStandardMacro.STANDARD_MACROS)
          .addVar("ctx", SimpleType.DYN)
          .addVar("instance", MapType.create(SimpleType.STRING, SimpleType.DYN))
          .addCompilerLibraries(STRINGS, CelExtensions.math(OPTIONS))
          .addRuntimeLibraries(STRINGS, CelExtensions.math(OPTIONS))
          .addFunctionDeclarations(Sizes.DECLARATIONS)
          .addFunctionDeclarations(Search.DECLARATIONS)
          .addFunctionBindings(Sizes.BINDINGS)
          .addFunctionBindings(Search.BINDINGS)
          .build();

  private final String source;
  private final CelRuntime.Program program;
  private final Sizes.Plan sizes;

  private Expression(String source, CelRuntime.Program program, Sizes.Plan sizes) {
    this.source = source;
    this.program = program;
    this.sizes = sizes;
  }

  /** Parse and type-check {@code source}; InvalidExpressionException names the first problem. */
  public static Expression compile(String source) {
    CelAbstractSyntaxTree ast;
    try {
      ast = CEL.compile(source).getAst();
    } catch (CelValidationException e) {
      String problem =
          e.getErrors().isEmpty() ? e.getMessage() : e.getErrors().get(0).toDisplayString(e.getSource());
      throw new InvalidExpressionException(source, problem);
    }
    try {
      Sizes.Plan sizes = Sizes.plan(ast.getExpr(), ast.getSource().getMacroCalls());
      return new Expression(source, CEL.createProgram(ast), sizes);
    } catch (CelEvaluationException e) {
      throw new InvalidExpressionException(source, e.getMessage());
    }
  }

  public String source() {
    return source;
  }

  /**
   * The JSON value of the expression for this context. {@code ctx} and the values of
   * {@code instance} are JSON-decoded values (null, Boolean, String, Number, List, Map with String
   * keys, or Jackson JsonNode); the result is null, Boolean, String, Long, Double, List or Map
   * (timestamps and durations as their text). EvaluationException when CEL fails or the result has
   * no JSON form.
   */
  public Object evaluate(Object ctx, Map<String, Object> instance) {
    Map<String, Object> vars;
    try {
      vars = Map.of("ctx", Values.toCel(ctx), "instance", Values.toCel(instance == null ? Map.of() : instance));
    } catch (Values.NotJson e) {
      throw new EvaluationException(source, "invalid_argument", e.getMessage());
    }
    Object result;
    try {
      result = program.trace(vars, sizes.listener());
    } catch (CelEvaluationException e) {
      throw new EvaluationException(source, kind(e), detail(e));
    } catch (Sizes.Stop e) {
      throw new EvaluationException(source, "invalid_argument", e.getMessage());
    }
    if (!Sizes.resultWithin(result)) {
      throw new EvaluationException(
          source, "not_json",
          "the result holds more than " + Sizes.SIZE_BUDGET + " characters, elements and entries");
    }
    try {
      return Values.fromCel(result);
    } catch (Values.NotJson e) {
      throw new EvaluationException(source, "not_json", e.getMessage());
    }
  }

  /** {@link #evaluate}, for a choice arm, filter or while: the result must be a bool. */
  public boolean condition(Object ctx, Map<String, Object> instance) {
    Object value = evaluate(ctx, instance);
    if (value instanceof Boolean b) {
      return b;
    }
    throw new EvaluationException(
        source, "not_boolean", "a condition must be a bool; it gave " + value);
  }

  // The profile's kinds by what cel-java's message says (first match wins), then by its code.
  private static final Object[][] KINDS = {
    {"no_such_key", Pattern.compile("(?i)key '.*' is not present|no such key|key not found")},
    {"division_by_zero", Pattern.compile("(?i)divide by zero|division by zero|modulus by zero")},
    {"overflow", Pattern.compile("(?i)overflow|out of (int64|uint64|integer) range|out of range for int")},
    {"out_of_range",
      Pattern.compile("(?i)index out of (range|bounds)|index '?-?\\d+'? out of range|"
          + "out of bounds|is greater than|is less than|negative|outside the bounds|beyond")},
    {"type_mismatch",
      Pattern.compile("(?i)no matching overload|no such overload|expected .* type|"
          + "does not support field selection|field selections must be performed on messages or maps|"
          + "cannot be converted")},
  };

  static String kind(CelEvaluationException e) {
    String message = detail(e);
    for (Object[] k : KINDS) {
      if (((Pattern) k[1]).matcher(message).find()) {
        return (String) k[0];
      }
    }
    CelErrorCode code = e.getErrorCode();
    if (code != null) {
      switch (code) {
        case ATTRIBUTE_NOT_FOUND:
          return "no_such_key";
        case DIVIDE_BY_ZERO:
          return "division_by_zero";
        case NUMERIC_OVERFLOW:
          return "overflow";
        case INDEX_OUT_OF_BOUNDS:
          return "out_of_range";
        case OVERLOAD_NOT_FOUND:
        case AMBIGUOUS_OVERLOAD:
          return "type_mismatch";
        default:
          break;
      }
    }
    return "invalid_argument";
  }

  /** cel-java's message, with its cause's when the message alone is the evaluator's prefix. */
  static String detail(CelEvaluationException e) {
    String m = e.getMessage() == null ? "" : e.getMessage();
    Throwable c = e.getCause();
    if (c != null && c.getMessage() != null && !m.contains(c.getMessage())) {
      m = m + ": " + c.getMessage();
    }
    return m;
  }
}
