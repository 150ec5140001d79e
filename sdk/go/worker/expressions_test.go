package worker

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/expr"
	"github.com/wiggle-engine/wiggle/sdk/go/graph"
	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

const exprRetry = `"retry":{"max_attempts":3,"backoff":"exponential","initial_ms":1000,"max_ms":60000},"timeout_ms":60000`

// exprTask is a task node's JSON: activity and id alike, on queue, leading to next.
func exprTask(id, queue, next string, checkpoint bool) string {
	cp := "false"
	if checkpoint {
		cp = "true"
	}
	return `"` + id + `":{"kind":"task","activity":"` + id + `","queue":"` + queue + `",` + exprRetry +
		`,"checkpoint":` + cp + `,"next":"` + next + `"}`
}

// exprFlow is a graph starting at "a" from node JSON members ("end" is added).
func exprFlow(t *testing.T, members ...string) ([]byte, string) {
	t.Helper()
	doc := []byte(`{"format":1,"name":"f","execution":"DEFAULT","input":null,"start":"a","nodes":{` +
		strings.Join(append(members, `"end":{"kind":"end"}`), ",") + `}}`)
	if _, err := graph.Parse(doc); err != nil {
		t.Fatalf("test graph does not parse: %v", err)
	}
	return doc, graph.VersionOf(doc)
}

// The chain a -> s (set) -> c (condition, true) -> b: the set and the condition travel with a.
func chainFlow(t *testing.T, checkpointA bool) ([]byte, string) {
	return exprFlow(t,
		exprTask("a", "default", "s", checkpointA),
		`"s":{"kind":"set","values":{"n":"size(ctx.trail) + 1","who":"instance.id + '/' + instance.flow"},"next":"c"}`,
		`"c":{"kind":"condition","if":"ctx.n > 1","next":"b","alt":"x","max_iterations":null}`,
		exprTask("b", "default", "end", false),
		exprTask("x", "default", "end", false),
	)
}

func TestLocalRunChainsThroughExpressions(t *testing.T) {
	cases := []struct {
		name       string
		mode       wigglepb.ExecutionMode
		batch      int
		checkpoint bool
		want       string
	}{
		{"async: one call at handback", lasync, 0, false, "a,s,c,b>end"},
		{"sync: a worker step and the expressions after it", lsync, 0, false, "a,s,c|b>end"},
		{"async: the batch size counts worker steps only", lasync, 1, false, "a,s,c|b>end"},
		{"async: a checkpoint flushes after the expressions", lasync, 0, true, "a,s,c|b>end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			doc, version := chainFlow(t, c.checkpoint)
			f.graphs[version] = doc
			run(t, f, Options{LocalBatchSize: c.batch}, true, task(version, "a", c.mode), "a", "b", "x")
			if got := f.batches(); got != c.want {
				t.Fatalf("batches %q, want %q", got, c.want)
			}
			var steps []*wigglepb.StepResult
			for _, a := range f.advances {
				steps = append(steps, a.GetSteps()...)
			}
			if got := string(steps[1].GetContext()); got != `{"trail":["a"],"n":2,"who":"i1/f"}` {
				t.Errorf("set context %s", got)
			}
			if p, ok := steps[2].GetOutcome().(*wigglepb.StepResult_Predicate); !ok || !p.Predicate {
				t.Errorf("condition result %v", steps[2])
			}
			// b sees the set's context (the condition leaves it as it was).
			if got := string(steps[3].GetContext()); got != `{"n":2,"trail":["a","b"],"who":"i1/f"}` {
				t.Errorf("b's context %s", got)
			}
		})
	}
}

// A set keeps the context's other values as written and its own numbers exact: every value
// sees the same incoming context.
func TestSetKeepsNumbersAndSeesTheIncomingContext(t *testing.T) {
	f := newFake()
	doc, version := exprFlow(t,
		exprTask("a", "default", "s", false),
		`"s":{"kind":"set","values":{"i":"ctx.i + 1","j":"ctx.i + 2","r":"0.1 + 0.2","h":"'<&>'"},"next":"end"}`,
	)
	f.graphs[version] = doc
	w := testWorker(f, Options{})
	w.Register("a", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"big":12345678901234567891,"f":1.50,"i":9007199254740989}`), nil
	})
	w.advanceRun.Store(1)
	w.runTask(task(version, "a", lasync))
	if got := f.batches(); got != "a,s>end" {
		t.Fatalf("batches %q", got)
	}
	want := `{"big":12345678901234567891,"f":1.50,"i":9007199254740990,"h":"<&>","j":9007199254740991,"r":0.30000000000000004}`
	if got := string(f.advances[0].GetSteps()[1].GetContext()); got != want {
		t.Errorf("set context\n %s\nwant\n %s", got, want)
	}
}

func TestSetWritesABigIntegralDoubleAsADouble(t *testing.T) {
	f := newFake()
	doc, version := exprFlow(t,
		exprTask("a", "default", "s", false),
		`"s":{"kind":"set","values":{"d":"9007199254740992.0 * 2.0","g":"2.0 * 3.0","l":"[9007199254740992.0 * 4.0]"},"next":"end"}`,
	)
	f.graphs[version] = doc
	w := testWorker(f, Options{})
	w.Register("a", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	})
	w.advanceRun.Store(1)
	w.runTask(task(version, "a", lasync))
	// Written as 18014398509481984, Python and Java would read an exact integer back.
	want := `{"d":1.8014398509481984e+16,"g":6,"l":[3.602879701896397e+16]}`
	if got := string(f.advances[0].GetSteps()[1].GetContext()); got != want {
		t.Errorf("set context\n %s\nwant\n %s", got, want)
	}
}

func TestLocalRunLoopsThroughAConditionWhile(t *testing.T) {
	for _, c := range []struct {
		max  int
		want string
	}{
		{100, "a,w,a,w,a,w>end"},
		{2, "a,w,a,w>loop_limit"},
	} {
		f := newFake()
		doc, version := exprFlow(t,
			exprTask("a", "default", "w", false),
			`"w":{"kind":"condition","if":"size(ctx.trail) < 3","next":"a","alt":"end","max_iterations":`+
				map[int]string{100: "100", 2: "2"}[c.max]+`}`,
		)
		f.graphs[version] = doc
		run(t, f, Options{}, true, task(version, "a", lasync), "a")
		if got := f.batches(); got != c.want {
			t.Errorf("max_iterations %d: batches %q, want %q", c.max, got, c.want)
		}
	}
}

func TestLocalRunHandsBackAfterTheChain(t *testing.T) {
	for name, c := range map[string]struct {
		members []string
		want    string
	}{
		"a false filter": {[]string{exprTask("a", "default", "c", false),
			`"c":{"kind":"condition","if":"size(ctx.trail) > 5","next":"end","alt":null,"max_iterations":null}`}, "a,c>filtered"},
		"another queue": {[]string{exprTask("a", "default", "s", false),
			`"s":{"kind":"set","values":{"k":"1"},"next":"z"}`, exprTask("z", "other", "end", false)}, "a,s>other_queue"},
		"the end": {[]string{exprTask("a", "default", "s", false),
			`"s":{"kind":"set","values":{"k":"1"},"next":"end"}`}, "a,s>end"},
		"an unknown activity": {[]string{exprTask("a", "default", "s", false),
			`"s":{"kind":"set","values":{"k":"1"},"next":"q"}`, exprTask("q", "default", "end", false)}, "a,s>unknown_activity"},
	} {
		for _, mode := range []wigglepb.ExecutionMode{lsync, lasync} {
			f := newFake()
			doc, version := exprFlow(t, c.members...)
			f.graphs[version] = doc
			run(t, f, Options{}, true, task(version, "a", mode), "a")
			if got := f.batches(); got != c.want {
				t.Errorf("%s (%s): batches %q, want %q", name, mode, got, c.want)
			}
		}
	}
}

func TestLocalRunDrainingStopsAtTheWorkerStepAfterTheChain(t *testing.T) {
	f := newFake()
	doc, version := exprFlow(t,
		exprTask("a", "default", "s", false),
		`"s":{"kind":"set","values":{"k":"1"},"next":"b"}`,
		exprTask("b", "default", "end", false),
	)
	f.graphs[version] = doc
	w := testWorker(f, Options{}, "b")
	w.Register("a", func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
		close(w.draining)
		return in, nil
	})
	w.advanceRun.Store(1)
	w.runTask(task(version, "a", lsync))
	if got := f.batches(); got != "a,s>shutdown" {
		t.Fatalf("batches %q", got)
	}
}

func TestExpressionFailuresEndTheRun(t *testing.T) {
	for name, c := range map[string]struct {
		node    string
		context string
		message string
		source  string // the expression the message names, "" for none
	}{
		"a missing key": {`"e":{"kind":"condition","if":"ctx.missing","next":"b","alt":"b","max_iterations":null}`, `{}`,
			"no_such_key: ", "ctx.missing"},
		"a non-boolean condition": {`"e":{"kind":"condition","if":"ctx.k","next":"b","alt":"b","max_iterations":null}`, `{"k":1}`,
			"not_boolean: ", "ctx.k"},
		"a division by zero in a set": {`"e":{"kind":"set","values":{"a":"1","z":"ctx.k / 0"},"next":"b"}`, `{"k":1}`,
			"division_by_zero: ", "ctx.k / 0"},
		"a set on a list": {`"e":{"kind":"set","values":{"k":"1"},"next":"b"}`, `[1]`,
			"type_mismatch: set 'e' needs an object context; the context is a list", ""},
		"a set on null": {`"e":{"kind":"set","values":{"k":"1"},"next":"b"}`, `null`,
			"type_mismatch: set 'e' needs an object context; the context is null", ""},
		"an expression that does not compile": {`"e":{"kind":"condition","if":"ctx.(","next":"b","alt":"b","max_iterations":null}`, `{}`,
			"invalid_argument: does not compile: ", "ctx.("},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake()
			doc, version := exprFlow(t, exprTask("a", "default", "e", false), c.node, exprTask("b", "default", "end", false))
			f.graphs[version] = doc
			var bRan atomic.Bool
			w := testWorker(f, Options{})
			w.Register("a", func(context.Context, json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(c.context), nil
			})
			w.Register("b", func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
				bRan.Store(true)
				return in, nil
			})
			w.advanceRun.Store(1)
			w.runTask(task(version, "a", lasync))
			if got := f.batches(); got != "a,e!>step_failed" {
				t.Fatalf("batches %q", got)
			}
			fl := f.advances[0].GetSteps()[1].GetFailure()
			if !strings.HasPrefix(fl.GetMessage(), c.message) || !fl.GetNonRetryable() || fl.GetErrorType() != "ExpressionError" {
				t.Errorf("failure %v, want a message starting %q", fl, c.message)
			}
			if c.source != "" && !strings.HasSuffix(fl.GetMessage(), " (expression '"+c.source+"')") {
				t.Errorf("failure %q does not name the expression %q", fl.GetMessage(), c.source)
			}
			if bRan.Load() {
				t.Error("the step after a failed expression ran")
			}
		})
	}
}

func TestExpressionsAreCompiledOnce(t *testing.T) {
	source := "size(ctx.trail) + 41 == 42 || true" // used by no other test
	n := &graph.Node{ID: "c", Kind: graph.KindCondition, If: source}
	before := cachedExpressions()
	for range 3 {
		out := evaluateNode(n, json.RawMessage(`{"trail":[1]}`), nil, 0)
		if out.predicate == nil || !*out.predicate {
			t.Fatalf("outcome %+v", out)
		}
	}
	if got := cachedExpressions(); got != before+1 {
		t.Errorf("%d cached after 3 evaluations, %d before", got, before)
	}
	x1, _ := compiled(source)
	x2, _ := compiled(source)
	if x1 == nil || x1 != x2 {
		t.Error("the same source compiled twice")
	}
}

func TestFailureMessageQuotesLikePython(t *testing.T) {
	for source, want := range map[string]string{
		`ctx.a`:           `'ctx.a'`,
		`ctx.a == 'x'`:    `"ctx.a == 'x'"`,
		`'a' + "b"`:       `'\'a\' + "b"'`,
		"ctx.a\n&& true":  `'ctx.a\n&& true'`,
		`ctx.s == "\\d"`:  `'ctx.s == "\\\\d"'`,
		"\x01":            `'\x01'`,
		`ctx.name == "é"`: `'ctx.name == "é"'`,
	} {
		got := failureMessage(&expr.EvaluationError{Source: source, Kind: expr.NoSuchKey, Detail: "d"})
		if wantMsg := "no_such_key: d (expression " + want + ")"; got != wantMsg {
			t.Errorf("%q: %s, want %s", source, got, wantMsg)
		}
	}
	if got := failureMessage(&expr.EvaluationError{Kind: expr.TypeMismatch, Detail: "d"}); got != "type_mismatch: d" {
		t.Errorf("no source: %s", got)
	}
}

// A server without AdvanceRun gets the worker step the SERVER way; the expressions buffered
// after it are dropped (the server evaluates them itself).
func TestUnimplementedAdvanceRunReportsOnlyTheWorkerStep(t *testing.T) {
	f := newFake()
	f.advanceErr = status.Error(codes.Unimplemented, "no AdvanceRun here")
	doc, version := chainFlow(t, false)
	f.graphs[version] = doc
	run(t, f, Options{}, false, task(version, "a", lsync), "a", "b", "x")
	if len(f.completes) != 1 || f.completes[0].GetTaskId() != "t-a" || string(f.completes[0].GetResult()) != `{"trail":["a"]}` {
		t.Fatalf("completes %v", f.completes)
	}
}
