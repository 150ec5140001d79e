package tracecontext

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

type vectors struct {
	TraceIDs []struct {
		Root    string `json:"root_instance_id"`
		TraceID string `json:"trace_id"`
	} `json:"trace_ids"`
	InstanceSpanIDs []struct {
		Instance string `json:"instance_id"`
		SpanID   string `json:"span_id"`
	} `json:"instance_span_ids"`
	StepSpanIDs []struct {
		Instance   string         `json:"instance_id"`
		Task       string         `json:"task_id"`
		Node       string         `json:"node_id"`
		Attempt    int            `json:"attempt"`
		LoopCounts map[string]int `json:"loop_counts"`
		Loops      string         `json:"loops"`
		SpanID     string         `json:"span_id"`
	} `json:"step_span_ids"`
	Traceparents []struct {
		Value   string `json:"traceparent"`
		Valid   bool   `json:"valid"`
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
		Flags   int    `json:"flags"`
	} `json:"traceparents"`
}

func TestTheSharedVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "spec", "tracing", "ids.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	for _, c := range v.TraceIDs {
		if got := TraceIDFor(c.Root); got != c.TraceID {
			t.Errorf("TraceIDFor(%q) = %s, want %s", c.Root, got, c.TraceID)
		}
	}
	for _, c := range v.InstanceSpanIDs {
		if got := InstanceSpanID(c.Instance); got != c.SpanID {
			t.Errorf("InstanceSpanID(%q) = %s, want %s", c.Instance, got, c.SpanID)
		}
	}
	for _, c := range v.StepSpanIDs {
		if got := LoopsKey(c.LoopCounts); got != c.Loops {
			t.Errorf("LoopsKey(%v) = %q, want %q", c.LoopCounts, got, c.Loops)
		}
		if got := StepSpanID(c.Instance, c.Task, c.Node, c.Attempt, c.LoopCounts); got != c.SpanID {
			t.Errorf("StepSpanID(%+v) = %s, want %s", c, got, c.SpanID)
		}
	}
	if len(v.Traceparents) == 0 {
		t.Fatal("no traceparent vectors")
	}
	for _, c := range v.Traceparents {
		got, ok := Parse(c.Value)
		if ok != c.Valid {
			t.Errorf("Parse(%q) ok = %v, want %v", c.Value, ok, c.Valid)
			continue
		}
		if ok && (got.TraceID != c.TraceID || got.SpanID != c.SpanID || int(got.Flags) != c.Flags) {
			t.Errorf("Parse(%q) = %+v", c.Value, got)
		}
	}
}
