package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Activity is a task handler: it receives the context (any JSON value) and returns the next
// context. A join's combine and an await's apply are activities too; they receive the shapes
// documented in docs/graph.md.
type Activity func(ctx context.Context, in json.RawMessage) (json.RawMessage, error)

// Predicate is a filter, choice or loop handler: it returns the branch to take.
type Predicate func(ctx context.Context, in json.RawMessage) (bool, error)

// handler is one registered activity. Exactly one of task and predicate is set.
type handler struct {
	task      Activity
	predicate Predicate
}

// registry maps activity names to handlers. Registration normally happens before Start, but
// the lock lets a program add handlers while the worker polls.
type registry struct {
	mu     sync.RWMutex
	byName map[string]handler
}

func (r *registry) add(name string, h handler) {
	if name == "" {
		panic("wiggle/worker: an activity needs a non-empty name")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName == nil {
		r.byName = map[string]handler{}
	}
	if _, dup := r.byName[name]; dup {
		// Go functions cannot be compared, so a second registration is always refused: two
		// handlers under one name is a wiring mistake, found at start-up rather than mid-run.
		panic(fmt.Sprintf("wiggle/worker: activity %q is already registered", name))
	}
	r.byName[name] = h
}

// names is every registered activity, sorted: what PollTasks and EagerDispatch list.
func (r *registry) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.byName))
	for name := range r.byName {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func (r *registry) get(name string) (handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.byName[name]
	return h, ok
}

// outcome is what one step produced: exactly one of context, predicate, failure.
type outcome struct {
	context   json.RawMessage
	predicate *bool
	failure   *failure
}

// failure is a failed step, as the wire's StepFailure.
type failure struct {
	message      string
	nonRetryable bool
	errorType    string
}

// runHandler runs one step and turns whatever happens (an error, a panic, a result that is not
// JSON) into an outcome, so no user mistake escapes into the worker's own loops. asPredicate says
// the node is a predicate: a JSON boolean is its value; anything else stays a context, which
// the server fails as it fails a SERVER-mode CompleteTask with a non-boolean result.
func runHandler(ctx context.Context, h handler, found bool, name string, in json.RawMessage, asPredicate bool) (out outcome) {
	if !found {
		return outcome{failure: &failure{
			message:   fmt.Sprintf("no activity named '%s' is registered on this worker", name),
			errorType: "ActivityNotFound",
		}}
	}
	if len(in) == 0 {
		in = json.RawMessage("null")
	}
	defer func() {
		if p := recover(); p != nil {
			out = outcome{failure: &failure{message: fmt.Sprintf("panic: %v", p), errorType: "panic"}}
		}
	}()
	if h.predicate != nil {
		v, err := h.predicate(ctx, in)
		if err != nil {
			return outcome{failure: failureOf(err)}
		}
		if asPredicate {
			return outcome{predicate: &v}
		}
		return outcome{context: json.RawMessage(fmt.Sprint(v))}
	}
	result, err := h.task(ctx, in)
	if err != nil {
		return outcome{failure: failureOf(err)}
	}
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	if !json.Valid(result) {
		return outcome{failure: &failure{
			message:   fmt.Sprintf("activity '%s' returned a value that is not JSON", name),
			errorType: "TypeError",
		}}
	}
	if !asPredicate {
		return outcome{context: result}
	}
	switch strings.TrimSpace(string(result)) {
	case "true":
		v := true
		return outcome{predicate: &v}
	case "false":
		v := false
		return outcome{predicate: &v}
	}
	return outcome{context: result}
}

// checkLimits fails, non-retryably, a result the server would not take: over its payload limit
// (0: the default) or nested deeper than the depth limit (docs/worker-protocol.md, "Limits").
// Retrying cannot make it smaller.
func checkLimits(out outcome, maxPayload int64) outcome {
	if out.context == nil {
		return out
	}
	if maxPayload <= 0 {
		maxPayload = defaultMaxPayload
	}
	if n := int64(len(out.context)); n > maxPayload {
		return outcome{failure: &failure{
			message:      fmt.Sprintf("step result is %d bytes; the limit is %d bytes (max_payload_bytes)", n, maxPayload),
			nonRetryable: true,
			errorType:    "PayloadTooLarge",
		}}
	}
	if d := depth(out.context); d > maxDepth {
		return outcome{failure: &failure{
			message:      fmt.Sprintf("step result nests %d levels deep; the limit is %d", d, maxDepth),
			nonRetryable: true,
			errorType:    "TooDeep",
		}}
	}
	return out
}

// depth is how deeply raw (valid JSON) nests arrays and objects.
func depth(raw json.RawMessage) int {
	deepest, level, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			level++
			deepest = max(deepest, level)
		case c == ']' || c == '}':
			level--
		}
	}
	return deepest
}

func failureOf(err error) *failure {
	var nr *nonRetryable
	if errors.As(err, &nr) {
		return &failure{message: err.Error(), nonRetryable: true, errorType: "NonRetryable"}
	}
	msg := err.Error()
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if msg == "" {
		msg = t.Name()
	}
	return &failure{message: msg, errorType: t.Name()}
}
