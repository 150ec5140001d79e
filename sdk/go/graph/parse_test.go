package graph_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wiggle-engine/wiggle/sdk/go/graph"
)

// The compile vectors of the language-neutral corpus, three levels up from this file.
const compileDir = "../../../spec/conformance/compile"

// TestCompileVectorsParse reads every canonical graph the compiler vectors pin and checks that
// its version is the one index.json names, and that every node reads back with its edges.
func TestCompileVectorsParse(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(compileDir, "index.json"))
	if err != nil {
		t.Fatalf("compile vectors missing: %v", err)
	}
	var index map[string]string
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(compileDir, "valid", "*.expected.json"))
	if len(files) == 0 {
		t.Fatal("no valid compile vectors")
	}
	for _, path := range files {
		base := strings.TrimSuffix(filepath.Base(path), ".expected.json")
		t.Run(base, func(t *testing.T) {
			doc, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			g, err := graph.Parse(doc)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := index[base+".yaml"]
			if want == "" {
				want = index[base+".json"]
			}
			if want == "" {
				t.Fatalf("index.json has no entry for %s", base)
			}
			if g.Version != want {
				t.Errorf("version %s, index says %s", g.Version, want)
			}
			checkAgainstGeneric(t, doc, g)
		})
	}
}

// checkAgainstGeneric compares the typed graph with a generic decoding of the same bytes, so
// a field the typed reader misspells or drops shows up.
func checkAgainstGeneric(t *testing.T, doc []byte, g *graph.Graph) {
	var generic struct {
		Nodes map[string]map[string]any `json:"nodes"`
	}
	if err := json.Unmarshal(doc, &generic); err != nil {
		t.Fatal(err)
	}
	if len(generic.Nodes) != len(g.Nodes) {
		t.Fatalf("%d nodes, generic decoding has %d", len(g.Nodes), len(generic.Nodes))
	}
	for id, gn := range generic.Nodes {
		n := g.Nodes[id]
		if n.ID != id || string(n.Kind) != gn["kind"] {
			t.Errorf("node %s: id %q kind %q", id, n.ID, n.Kind)
		}
		typed, _ := json.Marshal(n)
		var back map[string]any
		_ = json.Unmarshal(typed, &back)
		for k, v := range gn {
			if v == nil || v == false || v == "" {
				continue // the typed encoding omits zero values
			}
			if got, _ := json.Marshal(back[k]); string(got) != mustJSON(v) {
				t.Errorf("node %s field %s: typed %s, document %s", id, k, got, mustJSON(v))
			}
		}
		if n.IsWorkerStep() && n.StepActivity() == "" {
			t.Errorf("node %s runs on a worker but has no activity", id)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestParseRejectsDanglingEdges(t *testing.T) {
	_, err := graph.Parse([]byte(`{"format":1,"name":"x","execution":"DEFAULT","input":null,"start":"a",
		"nodes":{"a":{"kind":"sleep","duration_ms":1,"until":null,"next":"nowhere"},"end":{"kind":"end"}}}`))
	if err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Fatalf("err %v", err)
	}
	if _, err := graph.Parse([]byte(`{"format":1,"name":"x","execution":"DEFAULT","input":null,"start":"a",
		"nodes":{"a":{"kind":"teleport"}}}`)); err == nil {
		t.Fatal("an unknown kind must be refused")
	}
}

func TestRetryDelay(t *testing.T) {
	r := graph.Retry{MaxAttempts: 5, Backoff: "exponential", InitialMs: 100, MaxMs: 1000}
	for attempt, want := range map[int]int64{1: 100, 2: 200, 4: 800, 5: 1000, 80: 1000} {
		if got := r.DelayMs(attempt); got != want {
			t.Errorf("DelayMs(%d) = %d, want %d", attempt, got, want)
		}
	}
	if d := (graph.Retry{Backoff: "fixed", InitialMs: 50}).DelayMs(3); d != 50 {
		t.Errorf("fixed delay %d", d)
	}
}

// TestParseExpressionNodes reads the traversal corpus's expression graph: conditions (a filter,
// a choice arm, a loop's while) and a set keep their CEL sources exactly, with their edges.
func TestParseExpressionNodes(t *testing.T) {
	raw, err := os.ReadFile("../../../spec/conformance/traversal/expressions.json")
	if err != nil {
		t.Fatal(err)
	}
	var vf struct {
		Graph json.RawMessage `json:"graph"`
	}
	if err := json.Unmarshal(raw, &vf); err != nil {
		t.Fatal(err)
	}
	g, err := graph.Parse(vf.Graph)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	checkAgainstGeneric(t, vf.Graph, g)
	filter, while, set := g.Nodes["filter-1"], g.Nodes["while-1"], g.Nodes["set-1"]
	if filter.Kind != graph.KindCondition || filter.If != "ctx.ok" || filter.Alt != nil || filter.Next != "big" {
		t.Errorf("filter-1: %+v", filter)
	}
	if while.Kind != graph.KindCondition || while.MaxIterations == nil || *while.MaxIterations != 2 ||
		while.Alt == nil || *while.Alt != "z" {
		t.Errorf("while-1: %+v", while)
	}
	if set.Kind != graph.KindSet || set.Values["n"] != "0" || set.Next != "filter-1" || len(set.Values) != 1 {
		t.Errorf("set-1: %+v", set)
	}
	for _, n := range []*graph.Node{filter, while, set} {
		if !n.IsExpression() || n.IsWorkerStep() || n.StepActivity() != "" {
			t.Errorf("%s: an expression node is no worker step", n.ID)
		}
	}
	if g.Nodes["a"].IsExpression() {
		t.Error("a task is no expression node")
	}
}

func TestParseRejectsBadExpressionNodes(t *testing.T) {
	for name, nodes := range map[string]string{
		"condition without if":   `"a":{"kind":"condition","next":"end","alt":null,"max_iterations":null}`,
		"condition dangling alt": `"a":{"kind":"condition","if":"true","next":"end","alt":"nowhere","max_iterations":null}`,
		"set without values":     `"a":{"kind":"set","values":{},"next":"end"}`,
		"set dangling next":      `"a":{"kind":"set","values":{"k":"1"},"next":"nowhere"}`,
		"set non-string value":   `"a":{"kind":"set","values":{"k":1},"next":"end"}`,
	} {
		doc := `{"format":1,"name":"x","execution":"DEFAULT","input":null,"start":"a","nodes":{` + nodes + `,"end":{"kind":"end"}}}`
		if _, err := graph.Parse([]byte(doc)); err == nil {
			t.Errorf("%s: must be refused", name)
		}
	}
}
