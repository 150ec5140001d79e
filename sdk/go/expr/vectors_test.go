package expr_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wiggle-engine/wiggle/sdk/go/expr"
)

// The vectors live in the repository's language-neutral corpus, three levels up.
const vectorFile = "../../../spec/conformance/expressions/vectors.json"

// sizeFile holds the size budget's cases (docs/expressions.md, "The size budget").
const sizeFile = "../../../spec/conformance/expressions/sizes.json"

// timeFile holds the time limit's cases (docs/expressions.md, "The time limit").
const timeFile = "../../../spec/conformance/expressions/time.json"

type vectorCase struct {
	Name     string          `json:"name"`
	Expr     string          `json:"expr"`
	Ctx      json.RawMessage `json:"ctx"`
	Instance json.RawMessage `json:"instance"`
	Value    json.RawMessage `json:"value"`
	Error    string          `json:"error"`
}

func loadCases(t testing.TB) []vectorCase { return loadFile(t, vectorFile) }

func loadFile(t testing.TB, vectorFile string) []vectorCase {
	raw, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []vectorCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", vectorFile, err)
	}
	if len(doc.Cases) == 0 {
		t.Fatalf("no cases in %s", vectorFile)
	}
	return doc.Cases
}

// decode is a JSON document as encoding/json decodes it, with float64 numbers or, useNumber,
// json.Number.
func decode(t *testing.T, raw json.RawMessage, useNumber bool) any {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	if useNumber {
		d.UseNumber()
	}
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// same is JSON equality that tells 1 from true but not 1 from 1.0, as the Python suite's
// _same does: a number is compared by its value whatever its Go type.
func same(a, b any) bool {
	if fa, ok := asFloat(a); ok {
		fb, ok := asFloat(b)
		return ok && fa == fb
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !same(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !same(v, w) {
				return false
			}
		}
		return true
	default:
		return reflect.TypeOf(a) == reflect.TypeOf(b) && a == b
	}
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// knownFailures are vectors this evaluator does not yet pass, each with why. Each is run and
// must still fail (so the list shrinks when one is fixed), and is counted as failing.
var knownFailures = map[string]string{
	// cel-go (interpreter/attributes.go, refQualify) reports a field selected on a non-map,
	// non-message value as "no such key: x", the same message as an absent key, so the error
	// message alone cannot tell type_mismatch from no_such_key.
	"field of a non-map is a type mismatch": "cel-go says 'no such key' for a field of an int",
}

func TestExpressionVectors(t *testing.T) {
	expr.SetTimeLimit(t, expr.RoomyTimeLimit) // no case is about the time limit (export_test.go)
	cases := loadCases(t)
	names := map[string]bool{}
	kinds := map[expr.Kind]bool{}
	for _, k := range expr.Kinds {
		kinds[k] = true
	}
	for _, c := range cases {
		if names[c.Name] {
			t.Errorf("vector name %q is not unique", c.Name)
		}
		names[c.Name] = true
		if c.Error != "" && !kinds[expr.Kind(c.Error)] {
			t.Errorf("%s: error kind %q is not a kind of the profile", c.Name, c.Error)
		}
	}
	passed := 0
	for _, c := range cases {
		if why, known := knownFailures[c.Name]; known {
			t.Run(c.Name, func(t *testing.T) {
				if vectorPasses(c) {
					t.Fatalf("now passes: remove it from knownFailures (%s)", why)
				}
				t.Skipf("known failure: %s", why)
			})
			continue
		}
		if t.Run(c.Name, func(t *testing.T) { checkCase(t, c) }) {
			passed++
		}
	}
	t.Logf("%d of %d expression vectors pass", passed, len(cases))
}

func TestSizeBudgetVectors(t *testing.T) {
	expr.SetTimeLimit(t, expr.RoomyTimeLimit) // no case is about the time limit (export_test.go)
	cases := loadFile(t, sizeFile)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) { checkCase(t, c) })
	}
	if len(cases) < 23 {
		t.Fatalf("only %d size budget cases", len(cases))
	}
}

// TestTimeLimitVectors runs time.json's cases, each with its context built first. Each error case
// runs for BriefTimeLimit, twice (checkCase). No case asserts how fast it ran: the limit is
// wall-clock time, which a loaded machine stretches.
// TestTimeLimit: the profile's limit is a second (docs/expressions.md), and is what Evaluate
// enforces outside the tests that set another.
func TestTimeLimit(t *testing.T) {
	if expr.TimeLimit != time.Second || expr.CurrentTimeLimit() != expr.TimeLimit {
		t.Fatalf("the limit is %v (enforced: %v); the profile says 1s", expr.TimeLimit, expr.CurrentTimeLimit())
	}
}

func TestTimeLimitVectors(t *testing.T) {
	cases := loadFile(t, timeFile)
	for _, c := range cases {
		raw, err := json.Marshal(built(t, decode(t, c.Ctx, true)))
		if err != nil {
			t.Fatal(err)
		}
		c.Ctx = raw
		t.Run(c.Name, func(t *testing.T) {
			if c.Error == "" {
				// What a value case checks is that the evaluation is linear: it takes milliseconds
				// here, a search or a loop that is not takes minutes. Under a limit of a minute a
				// loaded machine cannot make the first fail, and the second still does. The
				// evaluator reads the clock before a node, not after the last one, so a single
				// search that is not linear would end minutes late with its value: the clock is
				// read once more here, as the limit would.
				expr.SetTimeLimit(t, expr.RoomyTimeLimit)
				start := time.Now()
				checkCase(t, c)
				if took := time.Since(start); took > expr.RoomyTimeLimit {
					t.Fatalf("%s took %v, past the limit of %v", c.Expr, took, expr.RoomyTimeLimit)
				}
				return
			}
			// Under a tenth of the profile's limit (BriefTimeLimit): each would run for ten
			// seconds or more without it, and must end with the limit's error (or the size
			// budget's).
			expr.SetTimeLimit(t, expr.BriefTimeLimit)
			checkCaseWith(t, c, func(detail string) bool {
				return detail == "the evaluation ran longer than 1 second" ||
					strings.HasPrefix(detail, "the evaluation made more than ")
			})
		})
	}
	if len(cases) < 11 {
		t.Fatalf("only %d time limit cases", len(cases))
	}
}

// built is a context of time.json with each object of one key that begins with `$` built, as the
// file's comment says: {"$repeat": [s, n]} s n times, {"$range": n} the ints 0 to n-1,
// {"$fill": [v, n]} n copies of v, {"$concat": [a, b, ...]} the strings joined.
func built(t *testing.T, v any) any {
	t.Helper()
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = built(t, e)
		}
		return out
	case map[string]any:
		if len(x) == 1 {
			for op, arg := range x {
				if strings.HasPrefix(op, "$") {
					return builtFrom(t, op, arg)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = built(t, e)
		}
		return out
	}
	return v
}

func builtFrom(t *testing.T, op string, arg any) any {
	t.Helper()
	args, _ := arg.([]any)
	str := func(v any) string {
		s, ok := built(t, v).(string)
		if !ok {
			t.Fatalf("%s: %#v is not a string", op, v)
		}
		return s
	}
	count := func(v any) int {
		number, _ := v.(json.Number)
		n, err := number.Int64()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		return int(n)
	}
	switch {
	case op == "$repeat" && len(args) == 2:
		return strings.Repeat(str(args[0]), count(args[1]))
	case op == "$range":
		out := make([]any, count(arg))
		for i := range out {
			out[i] = int64(i)
		}
		return out
	case op == "$fill" && len(args) == 2:
		out := make([]any, count(args[1]))
		for i := range out {
			out[i] = built(t, args[0])
		}
		return out
	case op == "$concat":
		var b strings.Builder
		for _, a := range args {
			b.WriteString(str(a))
		}
		return b.String()
	}
	t.Fatalf("cannot build %s from %#v", op, arg)
	return nil
}

// checkCase evaluates c with float64 and json.Number contexts: its value, or its error kind.
func checkCase(t *testing.T, c vectorCase) {
	t.Helper()
	checkCaseWith(t, c, nil)
}

// checkCaseWith is checkCase that also requires an error case's detail to satisfy detailOK
// (unless nil).
func checkCaseWith(t *testing.T, c vectorCase, detailOK func(string) bool) {
	t.Helper()
	{
		{
			x, err := expr.Compile(c.Expr)
			if err != nil {
				t.Fatalf("compile %q: %v", c.Expr, err)
			}
			for _, useNumber := range []bool{false, true} {
				ctx := decode(t, c.Ctx, useNumber)
				var instance map[string]any
				if inst := decode(t, c.Instance, useNumber); inst != nil {
					instance = inst.(map[string]any)
				}
				got, err := x.Evaluate(ctx, instance)
				if c.Error != "" {
					var ee *expr.EvaluationError
					if !errors.As(err, &ee) {
						t.Fatalf("%s gave %#v (err %v); want error %s", c.Expr, got, err, c.Error)
					}
					if string(ee.Kind) != c.Error {
						t.Fatalf("%s failed with %s (%s); want %s", c.Expr, ee.Kind, ee.Detail, c.Error)
					}
					if detailOK != nil && !detailOK(ee.Detail) {
						t.Fatalf("%s failed with %s (%s): not the detail wanted", c.Expr, ee.Kind, ee.Detail)
					}
					if !strings.Contains(ee.Error(), "'"+c.Expr+"'") {
						t.Fatalf("the message %q does not name the expression", ee.Error())
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", c.Expr, err)
				}
				if want := decode(t, c.Value, false); !same(got, want) {
					t.Fatalf("%s gave %#v; want %#v", c.Expr, got, want)
				}
				// The result is JSON-ready.
				if _, err := json.Marshal(got); err != nil {
					t.Fatalf("%s: the result %#v does not marshal: %v", c.Expr, got, err)
				}
			}
		}
	}
}

// vectorPasses is whether c gives its value or its error kind (float64 contexts).
func vectorPasses(c vectorCase) bool {
	x, err := expr.Compile(c.Expr)
	if err != nil {
		return false
	}
	var ctx any
	if json.Unmarshal(c.Ctx, &ctx) != nil {
		return false
	}
	var instance map[string]any
	if len(c.Instance) > 0 && json.Unmarshal(c.Instance, &instance) != nil {
		return false
	}
	got, err := x.Evaluate(ctx, instance)
	if c.Error != "" {
		var ee *expr.EvaluationError
		return errors.As(err, &ee) && string(ee.Kind) == c.Error
	}
	var want any
	return err == nil && json.Unmarshal(c.Value, &want) == nil && same(got, want)
}

func TestSameTellsApartWhatJSONTellsApart(t *testing.T) {
	if same(int64(1), true) || same(int64(1), 1.5) || same([]any{int64(1)}, []any{int64(1), int64(2)}) {
		t.Fatal("same confuses values JSON tells apart")
	}
	if !same(int64(6), 6.0) || !same(map[string]any{"a": []any{int64(1), "x", nil}}, map[string]any{"a": []any{1.0, "x", nil}}) {
		t.Fatal("same tells apart values JSON does not")
	}
}

func BenchmarkEvaluate(b *testing.B) {
	x, err := expr.Compile(`ctx.amount_cents >= 1000000 && ctx.country != "NL"`)
	if err != nil {
		b.Fatal(err)
	}
	ctx := map[string]any{"amount_cents": 1250000.0, "country": "DE"}
	b.ReportAllocs()
	for b.Loop() {
		if v, err := x.Evaluate(ctx, nil); err != nil || v != true {
			b.Fatal(v, err)
		}
	}
}
