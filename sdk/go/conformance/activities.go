// Package conformance implements the conformance activities of spec/conformance/ACTIVITIES.md
// for the Go worker. Each is a pure function of the context and of the step's node id and
// attempt, and writes the same bytes as the Python implementation (wiggle/conformance), so the
// corpus cannot tell the two workers apart.
package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wiggle-engine/wiggle/sdk/go/worker"
)

// Register binds every conformance activity on w, each writing its trace line first.
func Register(w worker.Worker) {
	tasks := map[string]func(context.Context, json.RawMessage) (json.RawMessage, error){
		"noop": noop, "append": appendStep, "inc": incKey("inc", "n"), "inc_m": incKey("inc_m", "m"),
		"zero": zero, "double": double, "fail_times": failTimes, "fail_always": failAlways,
		"fail_fatal": failFatal, "hold": hold, "merge_results": mergeResults,
		"sum_results": sumResults, "apply_signal": applySignal, "grow": grow, "nest": nest,
	}
	for name, fn := range tasks {
		w.Register(name, traced(name, fn))
	}
	preds := map[string]func(context.Context, json.RawMessage) bool{
		"is_true": isTrue, "lt": ltKeys("n", "limit"), "lt_m": ltKeys("m", "limit_m"), "is_even": isEven,
	}
	for name, fn := range preds {
		w.RegisterPredicate(name, func(ctx context.Context, in json.RawMessage) (bool, error) {
			trace(ctx, name)
			return fn(ctx, in), nil
		})
	}
}

func traced(name string, fn worker.Activity) worker.Activity {
	return func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		trace(ctx, name)
		return fn(ctx, in)
	}
}

func node(ctx context.Context) (string, int) {
	info, _ := worker.Step(ctx)
	return info.NodeID, info.Attempt
}

func obj(in json.RawMessage, activity string) (*object, error) {
	o, ok := parseObject(in)
	if !ok {
		return nil, worker.NonRetryable(fmt.Errorf("conformance: %s needs an object", activity))
	}
	return o, nil
}

// predObj reads a predicate's context: anything but an object reads as an empty object.
func predObj(in json.RawMessage) *object {
	if o, ok := parseObject(in); ok {
		return o
	}
	return &object{vals: map[string]json.RawMessage{}}
}

func noop(_ context.Context, in json.RawMessage) (json.RawMessage, error) { return normalize(in), nil }

func appendTo(ctx context.Context, o *object) json.RawMessage {
	id, _ := node(ctx)
	trail, _ := parseArray(o.get("trail"))
	o.set("trail", encodeArray(append(trail, json.RawMessage(jsonString(id)))))
	return o.encode()
}

func appendStep(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
	o, err := obj(in, "append")
	if err != nil {
		return nil, err
	}
	return appendTo(ctx, o), nil
}

func incKey(activity, key string) worker.Activity {
	return func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
		o, err := obj(in, activity)
		if err != nil {
			return nil, err
		}
		o.set(key, number{isInt: true, i: intOr0(o.get(key)) + 1}.encode())
		return o.encode(), nil
	}
}

func zero(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
	o, err := obj(in, "zero")
	if err != nil {
		return nil, err
	}
	o.set("n", json.RawMessage("0"))
	return o.encode(), nil
}

func double(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
	n, ok := parseNumber(in)
	if !ok {
		return nil, worker.NonRetryable(errors.New("conformance: double needs a number"))
	}
	if n.isInt {
		return number{isInt: true, i: 2 * n.i}.encode(), nil
	}
	return formatFloat(2 * n.f), nil
}

// grow is ctx with blob = grow_bytes (default 0) letters x: a result of a chosen size.
func grow(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
	o, err := obj(in, "grow")
	if err != nil {
		return nil, err
	}
	n := int64(0)
	if v := o.get("grow_bytes"); v != nil {
		n = max(0, intOr0(v))
	}
	o.set("blob", json.RawMessage(`"`+strings.Repeat("x", int(n))+`"`))
	return o.encode(), nil
}

// nest wraps ctx in nest_depth (default 1) lists: a result of a chosen depth.
func nest(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
	depth := int64(1)
	if o, ok := parseObject(in); ok {
		if v := o.get("nest_depth"); v != nil {
			depth = intOr0(v)
		}
	}
	body := normalize(in)
	depth = max(0, min(depth, 100000))
	return json.RawMessage(strings.Repeat("[", int(depth)) + string(body) + strings.Repeat("]", int(depth))), nil
}

func failTimes(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
	o, err := obj(in, "fail_times")
	if err != nil {
		return nil, err
	}
	id, attempt := node(ctx)
	var k int64
	if plan, ok := parseObject(o.get("fail_times")); ok {
		k = intOr0(plan.get(id))
	}
	if int64(attempt) <= k {
		return nil, fmt.Errorf("planned failure %s attempt %d", id, attempt)
	}
	return appendTo(ctx, o), nil
}

func failAlways(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
	id, attempt := node(ctx)
	return nil, fmt.Errorf("failure %s attempt %d", id, attempt)
}

func failFatal(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
	id, _ := node(ctx)
	return nil, worker.NonRetryable(fmt.Errorf("fatal %s", id))
}

// hold sleeps hold_ms (default 300) until a deadline, in slices of at most 50 ms; the worker
// heartbeats the lease on its own meanwhile. A deadline, not a count of slices: each slice's
// oversleep would add up on a loaded machine.
func hold(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
	o, err := obj(in, "hold")
	if err != nil {
		return nil, err
	}
	ms := int64(300)
	if v := o.get("hold_ms"); v != nil {
		ms = intOr0(v)
	}
	until := time.Now().Add(time.Duration(ms) * time.Millisecond)
	for left := time.Until(until); left > 0; left = time.Until(until) {
		select {
		case <-ctx.Done(): // the lease is lost: nothing we return would be accepted
			return nil, ctx.Err()
		case <-time.After(min(left, 50*time.Millisecond)):
		}
	}
	return appendTo(ctx, o), nil
}

func isTrue(ctx context.Context, in json.RawMessage) bool {
	id, _ := node(ctx)
	return string(predObj(in).get(id)) == "true"
}

func ltKeys(key, limit string) func(context.Context, json.RawMessage) bool {
	return func(_ context.Context, in json.RawMessage) bool {
		o := predObj(in)
		return intOr0(o.get(key)) < intOr0(o.get(limit))
	}
}

func isEven(_ context.Context, in json.RawMessage) bool {
	n, ok := parseNumber(in)
	return ok && n.isInt && n.i%2 == 0
}

// combineInput reads a combine's {"context": C, "results": R}; C must be an object.
func combineInput(in json.RawMessage, activity string) (*object, json.RawMessage, error) {
	o, err := obj(in, activity)
	if err != nil {
		return nil, nil, err
	}
	c, err := obj(o.get("context"), activity)
	if err != nil {
		return nil, nil, err
	}
	results := o.get("results")
	if results == nil {
		results = json.RawMessage("null")
	}
	return c, results, nil
}

func mergeResults(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
	c, results, err := combineInput(in, "merge_results")
	if err != nil {
		return nil, err
	}
	c.set("results", results)
	return c.encode(), nil
}

func sumResults(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
	c, results, err := combineInput(in, "sum_results")
	if err != nil {
		return nil, err
	}
	var values []json.RawMessage
	if r, ok := parseObject(results); ok {
		for _, k := range r.keys {
			values = append(values, r.vals[k])
		}
	} else {
		values, _ = parseArray(results)
	}
	total := number{isInt: true}
	for _, v := range values {
		add := number{isInt: true}
		if n, ok := parseNumber(v); ok {
			add = n
		} else if o, ok := parseObject(v); ok {
			add.i = intOr0(o.get("n"))
		}
		if total.isInt && add.isInt {
			total.i += add.i
		} else {
			total = number{f: total.float() + add.float()}
		}
	}
	c.set("sum", total.encode())
	return c.encode(), nil
}

func applySignal(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
	o, err := obj(in, "apply_signal")
	if err != nil {
		return nil, err
	}
	c, err := obj(o.get("context"), "apply_signal")
	if err != nil {
		return nil, err
	}
	signal := o.get("signal")
	if signal == nil {
		signal = json.RawMessage("null")
	}
	signals, _ := parseArray(c.get("signals"))
	c.set("signals", encodeArray(append(signals, signal)))
	return c.encode(), nil
}
