package dev.wiggle.worker;

import com.fasterxml.jackson.databind.JsonNode;

/** A filter, choice arm or loop {@code while} handler: it returns the branch to take. */
@FunctionalInterface
public interface PredicateActivity {
  boolean test(JsonNode input, StepInfo step) throws Exception;
}
