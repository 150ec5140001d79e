package traversal_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/wiggle-engine/wiggle/sdk/go/graph"
	"github.com/wiggle-engine/wiggle/sdk/go/traversal"
)

// The vectors live in the repository's language-neutral corpus, three levels up.
const vectorDir = "../../../spec/conformance/traversal"

type vectorFile struct {
	Description string          `json:"description"`
	Graph       json.RawMessage `json:"graph"`
	Cases       []struct {
		Description  string         `json:"description"`
		Node         string         `json:"node"`
		Predicate    *bool          `json:"predicate"`
		LoopCounts   map[string]int `json:"loop_counts"`
		WorkerQueues []string       `json:"worker_queues"`
		Expect       struct {
			Next       *string        `json:"next"`
			LoopCounts map[string]int `json:"loop_counts"`
			Handback   *string        `json:"handback"`
		} `json:"expect"`
	} `json:"cases"`
}

func TestTraversalVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no traversal vectors under %s (err %v)", vectorDir, err)
	}
	ran := 0
	for _, path := range files {
		if filepath.Base(path) == "lease_budget.json" {
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var vf vectorFile
		if err := json.Unmarshal(raw, &vf); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		g, err := graph.Parse(vf.Graph)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, c := range vf.Cases {
			name := filepath.Base(path) + ": " + c.Description
			t.Run(name, func(t *testing.T) {
				before := clone(c.LoopCounts)
				m, err := traversal.Advance(g, c.Node, c.WorkerQueues, c.Predicate, c.LoopCounts)
				if err != nil {
					t.Fatalf("Advance: %v", err)
				}
				wantNext := ""
				if c.Expect.Next != nil {
					wantNext = *c.Expect.Next
				}
				wantHandback := ""
				if c.Expect.Handback != nil {
					wantHandback = *c.Expect.Handback
				}
				if m.Next != wantNext || string(m.Handback) != wantHandback {
					t.Errorf("got next %q handback %q, want next %q handback %q",
						m.Next, m.Handback, wantNext, wantHandback)
				}
				if !reflect.DeepEqual(nonNil(m.LoopCounts), nonNil(c.Expect.LoopCounts)) {
					t.Errorf("loop counts %v, want %v", m.LoopCounts, c.Expect.LoopCounts)
				}
				if !reflect.DeepEqual(before, c.LoopCounts) {
					t.Errorf("Advance changed the caller's loop counts: %v -> %v", before, c.LoopCounts)
				}
			})
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("no traversal cases ran")
	}
}

func TestLeaseBudgetVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(vectorDir, "lease_budget.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vf struct {
		Cases []struct {
			RemainingMs int64 `json:"remaining_ms"`
			LeaseMs     int64 `json:"lease_ms"`
			Expect      bool  `json:"expect"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &vf); err != nil {
		t.Fatal(err)
	}
	if len(vf.Cases) == 0 {
		t.Fatal("no lease budget cases")
	}
	for _, c := range vf.Cases {
		if got := traversal.LeaseBudgetLeft(c.RemainingMs, c.LeaseMs); got != c.Expect {
			t.Errorf("LeaseBudgetLeft(%d, %d) = %v, want %v", c.RemainingMs, c.LeaseMs, got, c.Expect)
		}
	}
}

func TestSuccessorRejectsNonSteps(t *testing.T) {
	g, err := graph.Parse([]byte(`{"format":1,"name":"x","execution":"DEFAULT","input":null,"start":"p",
		"nodes":{"p":{"kind":"predicate","activity":"p","queue":"default","retry":{"max_attempts":3,"backoff":"fixed","initial_ms":1,"max_ms":1},
		"timeout_ms":1000,"next":"end","alt":null,"max_iterations":null},"end":{"kind":"end"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := traversal.Successor(g, "end", nil, nil); err == nil {
		t.Error("end is not a worker step")
	}
	if _, err := traversal.Successor(g, "p", nil, nil); err == nil {
		t.Error("a predicate without a value must be refused")
	}
	if _, err := traversal.Successor(g, "nope", nil, nil); err == nil {
		t.Error("an unknown node must be refused")
	}
}

func clone(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func nonNil(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}
