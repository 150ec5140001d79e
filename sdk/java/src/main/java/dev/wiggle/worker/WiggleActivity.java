package dev.wiggle.worker;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a public method as an activity for {@link Worker.Builder#activities(Object)}. The method
 * takes {@code (JsonNode)} or {@code (JsonNode, StepInfo)}; returning {@code boolean} or {@code
 * Boolean} makes it a predicate, returning {@code JsonNode} a task.
 *
 * <pre>{@code
 * class Orders {
 *   @WiggleActivity("validate")
 *   public JsonNode validate(JsonNode order) { ... }
 *
 *   @WiggleActivity("in_stock")
 *   public boolean inStock(JsonNode order, StepInfo step) { ... }
 * }
 * }</pre>
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.METHOD)
public @interface WiggleActivity {
  /** The activity name the flow binds the step to; empty: the method's name. */
  String value() default "";
}
