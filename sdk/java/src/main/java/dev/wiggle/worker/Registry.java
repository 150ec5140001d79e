package dev.wiggle.worker;

import com.fasterxml.jackson.databind.JsonNode;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/** Activity names to handlers. Names are fixed before the worker starts polling. */
final class Registry {
  /** One registered activity: exactly one of the two is set. */
  record Handler(Activity task, PredicateActivity predicate) {}

  private final Map<String, Handler> byName = new ConcurrentHashMap<>();

  void add(String name, Handler h) {
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException("an activity needs a non-empty name");
    }
    if (name.length() > 200) {
      throw new IllegalArgumentException("activity names are at most 200 characters");
    }
    // Two handlers under one name is a wiring mistake: found at start-up, not mid-run.
    if (byName.putIfAbsent(name, h) != null) {
      throw new IllegalArgumentException("activity '" + name + "' is already registered");
    }
  }

  Handler get(String name) {
    return byName.get(name);
  }

  /** Every name, sorted: what PollTasks tells the server this worker can run. */
  List<String> names() {
    return List.copyOf(new TreeMap<>(byName).keySet());
  }

  /** Registers every {@link WiggleActivity} method of {@code bean}. */
  void addAnnotated(Object bean) {
    int found = 0;
    for (Method m : bean.getClass().getMethods()) {
      WiggleActivity a = m.getAnnotation(WiggleActivity.class);
      if (a == null) {
        continue;
      }
      String name = a.value().isEmpty() ? m.getName() : a.value();
      add(name, handlerOf(bean, m, name));
      found++;
    }
    if (found == 0) {
      throw new IllegalArgumentException(
          bean.getClass().getName() + " has no public method annotated @WiggleActivity");
    }
  }

  private static Handler handlerOf(Object bean, Method m, String name) {
    Class<?>[] params = m.getParameterTypes();
    boolean withStep = params.length == 2 && params[1] == StepInfo.class;
    if (params.length < 1 || params.length > 2 || params[0] != JsonNode.class
        || (params.length == 2 && !withStep)) {
      throw new IllegalArgumentException(
          "@WiggleActivity method " + m + " must take (JsonNode) or (JsonNode, StepInfo)");
    }
    Class<?> ret = m.getReturnType();
    if (ret == boolean.class || ret == Boolean.class) {
      return new Handler(null, (in, step) -> Boolean.TRUE.equals(invoke(bean, m, withStep, in, step)));
    }
    if (JsonNode.class.isAssignableFrom(ret)) {
      return new Handler((in, step) -> (JsonNode) invoke(bean, m, withStep, in, step), null);
    }
    throw new IllegalArgumentException(
        "@WiggleActivity method " + m + " for '" + name + "' must return JsonNode or boolean");
  }

  private static Object invoke(Object bean, Method m, boolean withStep, JsonNode in, StepInfo step)
      throws Exception {
    try {
      return withStep ? m.invoke(bean, in, step) : m.invoke(bean, in);
    } catch (InvocationTargetException e) {
      // The handler's own exception, not the reflection wrapper, decides retry or not.
      if (e.getCause() instanceof Exception ex) {
        throw ex;
      }
      if (e.getCause() instanceof Error err) {
        throw err;
      }
      throw e;
    }
  }
}
