package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wiggle-engine/wiggle/sdk/go/graph"
	"github.com/wiggle-engine/wiggle/sdk/go/worker"
)

// capture is a worker.Worker that only records what is registered.
type capture struct {
	worker.Worker
	tasks map[string]worker.Activity
	preds map[string]worker.Predicate
}

func (c *capture) Register(name string, fn worker.Activity)           { c.tasks[name] = fn }
func (c *capture) RegisterPredicate(name string, fn worker.Predicate) { c.preds[name] = fn }

func registered() *capture {
	c := &capture{tasks: map[string]worker.Activity{}, preds: map[string]worker.Predicate{}}
	Register(c)
	return c
}

type result struct {
	OK    *string `json:"ok"`
	Error string  `json:"error"`
	Fatal bool    `json:"fatal"`
}

type paritycase struct {
	Activity string `json:"activity"`
	Input    string `json:"input"`
	Node     string `json:"node"`
	Attempt  int    `json:"attempt"`
}

// Inputs chosen to catch the ways two JSON stacks differ: key order, replaced vs added keys,
// missing and ill-typed fields, non-objects, non-ASCII and escapes, floats, booleans as numbers.
var parityCases = func() []paritycase {
	objects := []string{
		`{}`, `{"trail":["x"],"n":1}`, `{"z":1,"n":2,"a":"é\u2028<&>","trail":"no"}`,
		`{"n":true,"m":1.5,"limit":3,"limit_m":2}`, `{"n":-4,"limit":-3,"hold_ms":10}`,
		`{"fail_times":{"f":2},"n":{"x":1}}`, `{"a":[1,{"b":null}],"s":"q\"\\\n"}`,
		`{"hold_ms":"soon"}`, `{"n":9007199254740993,"limit":9007199254740994}`,
		`{"grow_bytes":3,"blob":1,"k":4.0}`, `{"grow_bytes":-2}`, `{"nest_depth":3,"f":4.0}`,
		`{"nest_depth":0}`, `{"nest_depth":2.0,"n":18446744073709551615}`,
	}
	scalars := []string{`null`, `3`, `2.5`, `-7`, `true`, `"x"`, `[1,2]`, `0`, `1e3`}
	combines := []string{
		`{"context":{"k":1,"sum":5},"results":{"b":{"n":2},"a":3,"c":"x"}}`,
		`{"context":{"k":1},"results":[1,{"n":4},{"m":9},2.5,true]}`,
		`{"context":{},"results":null}`, `{"context":3,"results":[]}`, `{"results":[1]}`,
		`{"context":{"signals":[1]},"signal":{"p":"é"}}`, `{"context":{"x":1}}`,
		`{"context":{"signals":"bad"},"signal":[null]}`, `[]`, `{"context":{},"results":5}`,
		`{"context":{},"results":[1.5,2.5]}`,
	}
	var cs []paritycase
	for _, act := range []string{"noop", "append", "inc", "inc_m", "zero", "hold", "fail_times",
		"fail_always", "fail_fatal", "is_true", "lt", "lt_m", "is_even", "double", "grow", "nest"} {
		for _, in := range append(append([]string{}, objects...), scalars...) {
			if act == "hold" && strings.HasPrefix(in, "{") && !strings.Contains(in, "hold_ms") {
				continue // 300 ms each: the default is covered once below
			}
			for _, node := range []string{"f", "a"} {
				cs = append(cs, paritycase{act, in, node, 2})
			}
		}
	}
	cs = append(cs, paritycase{"hold", `{"k":1}`, "h", 1})
	for _, act := range []string{"merge_results", "sum_results", "apply_signal"} {
		for _, in := range append(combines, `{}`, `5`) {
			cs = append(cs, paritycase{act, in, "j", 1})
		}
	}
	return cs
}()

// TestParityWithPython runs every case through these activities and through the Python ones
// (wiggle/conformance) and demands the same bytes, or the same failure.
func TestParityWithPython(t *testing.T) {
	t.Setenv(TraceEnv, "")
	py := os.Getenv("PYTHON")
	if py == "" {
		py = "python3"
	}
	probe := exec.Command(py, "-c", "import wiggle.conformance._activities")
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("Python conformance activities not importable (run scripts/setup.sh first) (%v): %s", err, out)
	}
	in, _ := json.Marshal(parityCases)
	cmd := exec.Command(py, "-c", pythonSide)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python side: %v", err)
	}
	var want []result
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(parityCases) {
		t.Fatalf("python side answered %d results (%v): %s", len(want), err, out)
	}
	c := registered()
	for i, pc := range parityCases {
		got := runGo(c, pc)
		w := want[i]
		same := (got.OK == nil) == (w.OK == nil) && got.Error == w.Error && got.Fatal == w.Fatal &&
			(got.OK == nil || *got.OK == *w.OK)
		if !same {
			t.Errorf("%s(%s) at %s: go %s, python %s", pc.Activity, pc.Input, pc.Node, show(got), show(w))
		}
	}
}

func runGo(c *capture, pc paritycase) result {
	ctx := worker.WithStep(context.Background(), worker.StepInfo{
		InstanceID: "i", NodeID: pc.Node, Attempt: pc.Attempt, Flow: "f", Version: "v",
		Activity: pc.Activity, ExecutionMode: graph.ModeServer, TaskID: "t",
	})
	var raw json.RawMessage
	var err error
	if p, ok := c.preds[pc.Activity]; ok {
		var v bool
		v, err = p(ctx, json.RawMessage(pc.Input))
		raw, _ = json.Marshal(v)
	} else {
		raw, err = c.tasks[pc.Activity](ctx, json.RawMessage(pc.Input))
	}
	if err != nil {
		return result{Error: err.Error(), Fatal: worker.IsNonRetryable(err)}
	}
	s := string(raw)
	return result{OK: &s}
}

func show(r result) string {
	if r.OK != nil {
		return *r.OK
	}
	b, _ := json.Marshal(r)
	return string(b)
}

func TestTraceLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	t.Setenv(TraceEnv, path)
	c := registered()
	ctx := worker.WithStep(context.Background(), worker.StepInfo{InstanceID: "i-1", NodeID: "n", Attempt: 3, Flow: "fl"})
	if _, err := c.tasks["noop"](ctx, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.preds["is_even"](ctx, json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := `{"instance_id":"i-1","flow":"fl","node_id":"n","activity":"noop","attempt":3}` + "\n" +
		`{"instance_id":"i-1","flow":"fl","node_id":"n","activity":"is_even","attempt":3}` + "\n"
	if string(got) != want {
		t.Errorf("trace\n%s\nwant\n%s", got, want)
	}
}

func TestEveryDocumentedActivityIsRegistered(t *testing.T) {
	doc, err := os.ReadFile("../../../spec/conformance/ACTIVITIES.md")
	if err != nil {
		t.Fatalf("ACTIVITIES.md not found: %v", err)
	}
	c := registered()
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		name := strings.SplitN(strings.TrimPrefix(line, "| `"), "`", 2)[0]
		if c.tasks[name] == nil && c.preds[name] == nil {
			t.Errorf("activity %q of ACTIVITIES.md is not registered", name)
		}
	}
}

const pythonSide = `
import json, sys
import orjson
from wiggle.conformance._activities import build_registry
from wiggle.graph import ExecutionMode
from wiggle.worker import NonRetryable
from wiggle.worker._context import StepInfo, running

reg = build_registry()
out = []
for c in json.load(sys.stdin):
    info = StepInfo(instance_id="i", node_id=c["node"], attempt=c["attempt"], flow="f", version="v",
                    activity=c["activity"], execution_mode=ExecutionMode.SERVER, task_id="t")
    with running(info):
        try:
            r = reg.get(c["activity"]).fn(orjson.loads(c["input"]))
            out.append({"ok": orjson.dumps(r).decode()})
        except NonRetryable as e:
            out.append({"error": e.message, "fatal": True})
        except Exception as e:
            out.append({"error": str(e), "fatal": False})
print(json.dumps(out))
`
