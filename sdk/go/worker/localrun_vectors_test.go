package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/graph"
	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// The local-run vectors of spec/conformance/localrun/, run against the real local run over the
// fake server: the same vectors the Python worker runs.

type localrunFile struct {
	Description string           `json:"description"`
	Graph       json.RawMessage  `json:"graph"`
	Cases       []localrunVector `json:"cases"`
}

type localrunVector struct {
	Description     string            `json:"description"`
	Mode            string            `json:"mode"`
	WorkerQueues    []string          `json:"worker_queues"`
	WorkerActivites []string          `json:"worker_activities"`
	BatchSize       int               `json:"batch_size"`
	MaxRequestBytes int64             `json:"max_request_bytes"`
	Start           string            `json:"start"`
	Attempt         int32             `json:"attempt"`
	LoopCounts      map[string]int    `json:"loop_counts"`
	Steps           []string          `json:"steps"`
	AfterStep       map[string]string `json:"after_step"`
	AdvanceRun      string            `json:"advance_run"`
	Expect          []string          `json:"expect"`
	ExpectAttempts  []int             `json:"expect_attempts"`
}

func TestLocalRunVectors(t *testing.T) {
	paths, err := filepath.Glob("../../../spec/conformance/localrun/*.json")
	if err != nil || len(paths) < 3 {
		t.Fatalf("local-run vectors not found (%v): %v", err, paths)
	}
	n := 0
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var file localrunFile
		if err := json.Unmarshal(raw, &file); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, c := range file.Cases {
			n++
			name := strings.TrimSuffix(filepath.Base(path), ".json") + ": " + c.Description
			t.Run(name, func(t *testing.T) { runVector(t, file.Graph, c) })
		}
	}
	if n < 40 {
		t.Fatalf("only %d local-run vectors", n)
	}
}

// canonical re-encodes the vector's graph the way the compiler does, so it hashes to a version.
func canonical(t *testing.T, doc json.RawMessage) ([]byte, *graph.Graph) {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v) // sorted keys, no whitespace: what the vectors' graphs need
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.Parse(b)
	if err != nil {
		t.Fatalf("vector graph does not parse: %v", err)
	}
	return b, g
}

func runVector(t *testing.T, doc json.RawMessage, c localrunVector) {
	f := newFake()
	_, g := canonical(t, doc)
	if c.AdvanceRun == "unimplemented" {
		f.advanceErr = status.Error(codes.Unimplemented, "no AdvanceRun here")
	}
	w := testWorker(f, Options{Queues: c.WorkerQueues, LocalBatchSize: c.BatchSize})
	var lease *lease
	var attempts []int
	outcomes := append([]string(nil), c.Steps...)
	afterStep := func(n int) {
		switch c.AfterStep[fmt.Sprint(n)] {
		case "shutdown":
			close(w.draining)
		case "lease_budget": // a tenth of the lease left
			now := time.Now().UnixMilli()
			lease.renewed(now+lease.lengthNow().Milliseconds()/10, now, 0)
		case "lease_lost":
			lease.lose("the vector says so")
		}
	}
	handler := func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		info, _ := Step(ctx)
		attempts = append(attempts, info.Attempt)
		n := len(attempts)
		defer afterStep(n)
		if len(outcomes) == 0 {
			return nil, errors.New("the vector has no outcome left for this step")
		}
		kind, size, _ := strings.Cut(outcomes[0], " ")
		outcomes = outcomes[1:]
		switch kind {
		case "fail":
			return nil, fmt.Errorf("planned failure %d", n)
		case "true", "false":
			return json.RawMessage(kind), nil
		case "not_boolean":
			return json.RawMessage(`{"not":"a boolean"}`), nil
		}
		if size != "" {
			var bytes int
			fmt.Sscan(size, &bytes)
			return json.RawMessage(`"` + strings.Repeat("x", bytes-2) + `"`), nil
		}
		return json.RawMessage(fmt.Sprintf(`{"step":%d}`, n)), nil
	}
	for _, node := range g.Nodes {
		a := node.StepActivity()
		if a == "" || (c.WorkerActivites != nil && !contains(c.WorkerActivites, a)) {
			continue
		}
		if _, dup := w.reg.get(a); !dup {
			w.Register(a, handler)
		}
	}
	counts, _ := json.Marshal(c.LoopCounts)
	now := time.Now().UnixMilli()
	tk := &wigglepb.Task{
		TaskId: c.Start, Lease: "lease-1", LeaseExpiresAtMs: now + 60000, ServerNowMs: now,
		InstanceId: "i-1", Flow: g.Name, Version: g.Version, NodeId: c.Start,
		Activity: g.Nodes[c.Start].StepActivity(), Queue: c.WorkerQueues[0], Attempt: c.Attempt,
		Input: []byte(`{}`), ExecutionMode: wigglepb.ExecutionMode(wigglepb.ExecutionMode_value[c.Mode]),
		LoopCounts: counts, TimeoutMs: 60000, MaxRequestBytes: c.MaxRequestBytes,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lease = newLease(tk, cancel)
	newLocalRun(w, tk, g, lease).run(ctx)

	if got := f.reports(); !reflect.DeepEqual(got, c.Expect) && !(len(got) == 0 && len(c.Expect) == 0) {
		t.Errorf("reports %q\n want %q", got, c.Expect)
	}
	if len(outcomes) != 0 {
		t.Errorf("steps the worker never ran: %v", outcomes)
	}
	if c.ExpectAttempts != nil && !reflect.DeepEqual(attempts, c.ExpectAttempts) {
		t.Errorf("attempts %v, want %v", attempts, c.ExpectAttempts)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
