package expr_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wiggle-engine/wiggle/sdk/go/expr"
)

// failure is the *EvaluationError of src against ctx, and how long the evaluation took.
func failure(t *testing.T, src string, ctx any) (*expr.EvaluationError, time.Duration) {
	t.Helper()
	x, err := expr.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	v, err := x.Evaluate(ctx, nil)
	took := time.Since(start)
	var ee *expr.EvaluationError
	if !errors.As(err, &ee) {
		t.Fatalf("%s gave %#v (err %v) after %v; want an evaluation error", src, v, err, took)
	}
	return ee, took
}

func ints(n int) []any {
	l := make([]any, n)
	for i := range l {
		l[i] = float64(i)
	}
	return l
}

// Without the limit this evaluation reads 18 GB and takes seconds; `|| true` cannot set it aside.
// The evaluator reads the clock only while the evaluation runs, so the limit's detail shows that
// the clock stopped it there, before its end. How soon after the limit it stopped is a speed, for
// benchmarks: the limit is wall-clock time, which a loaded machine stretches. The bound of 30
// seconds, far past the limit and its one step of lateness on any machine, only catches an
// evaluation that ran on long after the clock said stop; that it ran for the limit at least, no
// machine can change.
func TestTimeLimitStopsAnEvaluation(t *testing.T) {
	ctx := map[string]any{"a": strings.Repeat("a", 2_000_000), "l": ints(9000)}
	ee, took := failure(t, `ctx.l.all(x, size(ctx.a) > 0) || true`, ctx)
	if ee.Kind != expr.InvalidArgument || ee.Detail != "the evaluation ran longer than 1 second" {
		t.Fatalf("failed with %s (%s)", ee.Kind, ee.Detail)
	}
	if took < expr.TimeLimit || took > 30*time.Second {
		t.Fatalf("stopped after %v; want after %v, and long before 30 s", took, expr.TimeLimit)
	}
}

// Every comprehension counts each step it takes, and the 10,001st of an evaluation stops it,
// which no `||` can set aside.
func TestIterationBudgetIsExact(t *testing.T) {
	expr.SetTimeLimit(t, expr.RoomyTimeLimit) // 10,000 steps: not about the time limit
	for _, src := range []string{
		`ctx.l.all(x, x >= 0)`,
		`ctx.l.exists(x, x < 0)`,
		`ctx.l.exists_one(x, x < 0)`,
		`ctx.l.map(x, x).size() > 0`,
		`ctx.l.filter(x, x >= 0).size() > 0`,
		`ctx.l.map(x, x >= 0, x).size() > 0`,
		`ctx.l.all(x, x >= 0) || true`,
	} {
		x, err := expr.Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := x.Evaluate(map[string]any{"l": ints(expr.IterationBudget)}, nil); err != nil {
			t.Fatalf("%s over %d elements: %v", src, expr.IterationBudget, err)
		} else if _, ok := v.(bool); !ok {
			t.Fatalf("%s gave %#v", src, v)
		}
		ee, _ := failure(t, src, map[string]any{"l": ints(expr.IterationBudget + 1)})
		want := fmt.Sprintf("more than %d comprehension iterations in one evaluation", expr.IterationBudget)
		if ee.Kind != expr.InvalidArgument || ee.Detail != want {
			t.Fatalf("%s failed with %s (%s)", src, ee.Kind, ee.Detail)
		}
	}
}
