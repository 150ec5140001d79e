package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

const (
	lsync  = wigglepb.ExecutionMode_LOCAL_SYNC
	lasync = wigglepb.ExecutionMode_LOCAL_ASYNC
)

// run runs one task to its report on a fresh worker over f, with AdvanceRun support already
// known (known=true) or still to be discovered.
func run(t *testing.T, f *fakeServer, opts Options, known bool, tk *wigglepb.Task, names ...string) *worker {
	t.Helper()
	w := testWorker(f, opts, names...)
	if known {
		w.advanceRun.Store(1)
	}
	w.runTask(tk)
	return w
}

func TestLocalRunBatches(t *testing.T) {
	cases := []struct {
		name  string
		specs []string
		mode  wigglepb.ExecutionMode
		known bool
		batch int
		want  string
	}{
		{"sync reports every step", []string{"a:task:default", "b:task:default", "c:task:default"}, lsync, true, 0, "a|b|c>end"},
		{"async reports once at handback", []string{"a:task:default", "b:task:default", "c:task:default"}, lasync, true, 0, "a,b,c>end"},
		{"a fresh worker does not probe AdvanceRun", []string{"a:task:default", "b:task:default", "c:task:default"}, lasync, false, 0, "a,b,c>end"},
		{"async flushes after a checkpoint", []string{"a:task:default", "b:cp:default", "c:task:default", "d:task:default"}, lasync, true, 0, "a,b|c,d>end"},
		{"async flushes a full batch", []string{"a:task:default", "b:task:default", "c:task:default", "d:task:default", "e:task:default"}, lasync, true, 2, "a,b|c,d|e>end"},
		{"sync hands back at a queue change", []string{"a:task:default", "b:task:other"}, lsync, true, 0, "a>other_queue"},
		{"async hands back at a sleep", []string{"a:task:default", "b:task:default", "s:sleep:-", "c:task:default"}, lasync, true, 0, "a,b>sleep"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			doc, version := flow(t, c.specs...)
			f.graphs[version] = doc
			run(t, f, Options{LocalBatchSize: c.batch}, c.known, task(version, "a", c.mode), "a", "b", "c", "d", "e")
			if got := f.batches(); got != c.want {
				t.Errorf("batches %q, want %q", got, c.want)
			}
			if len(f.completes)+len(f.fails) != 0 {
				t.Errorf("a local run used CompleteTask/FailTask")
			}
		})
	}
}

func TestLocalRunCarriesTheContext(t *testing.T) {
	f := newFake()
	doc, version := flow(t, "a:task:default", "b:task:default", "c:task:default")
	f.graphs[version] = doc
	run(t, f, Options{}, true, task(version, "a", lasync), "a", "b", "c")
	steps := f.advances[0].GetSteps()
	if got := string(steps[2].GetContext()); got != `{"trail":["a","b","c"]}` {
		t.Errorf("final context %s", got)
	}
}

func TestLocalRunFailureFlushesThePrefix(t *testing.T) {
	f := newFake()
	doc, version := flow(t, "a:task:default", "b:task:default", "c:task:default")
	f.graphs[version] = doc
	w := testWorker(f, Options{}, "a", "b")
	w.Register("c", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, NonRetryable(errors.New("card stolen"))
	})
	w.advanceRun.Store(1)
	w.runTask(task(version, "a", lasync))
	if got := f.batches(); got != "a,b,c!>step_failed" {
		t.Fatalf("batches %q", got)
	}
	fl := f.advances[0].GetSteps()[2].GetFailure()
	if fl.GetMessage() != "card stolen" || !fl.GetNonRetryable() {
		t.Errorf("failure %v", fl)
	}
}

func TestLocalRunFilter(t *testing.T) {
	f := newFake()
	doc, version := flow(t, "a:task:default", "ok:filter:default", "b:task:default")
	f.graphs[version] = doc
	w := testWorker(f, Options{}, "a", "b")
	w.RegisterPredicate("ok", func(context.Context, json.RawMessage) (bool, error) { return false, nil })
	w.advanceRun.Store(1)
	w.runTask(task(version, "a", lsync))
	if got := f.batches(); got != "a|ok>filtered" {
		t.Fatalf("batches %q", got)
	}
	if p := f.advances[1].GetSteps()[0].GetOutcome(); p.(*wigglepb.StepResult_Predicate).Predicate {
		t.Errorf("predicate reported true")
	}
}

func TestLocalRunStopsWhenNotRunning(t *testing.T) {
	f := newFake()
	f.statusAfter = wigglepb.InstanceStatus_CANCELLED
	doc, version := flow(t, "a:task:default", "b:task:default")
	f.graphs[version] = doc
	run(t, f, Options{}, true, task(version, "a", lsync), "a", "b")
	if got := f.batches(); got != "a" {
		t.Fatalf("batches %q, want only the first step", got)
	}
}

func TestLocalRunLeaseBudget(t *testing.T) {
	f := newFake()
	doc, version := flow(t, "a:task:default", "b:task:default")
	f.graphs[version] = doc
	tk := task(version, "a", lasync)
	tk.LeaseExpiresAtMs = time.Now().Add(10 * time.Second).UnixMilli() // < a quarter of 60 s left
	run(t, f, Options{}, true, tk, "a", "b")
	if got := f.batches(); got != "a>lease_budget" {
		t.Fatalf("batches %q", got)
	}
}

// A next step with a longer timeout than the lease was renewed for is announced first, by a
// heartbeat naming it: the server renews by its timeout, and the run goes on.
func TestLocalRunHeartbeatsBeforeALongerStep(t *testing.T) {
	f := newFake()
	doc, version := flow(t, "a:task:default", "b:task:default")
	f.graphs[version] = doc
	tk := task(version, "a", lasync)
	tk.TimeoutMs = 1000
	tk.LeaseExpiresAtMs = time.Now().Add(100 * time.Millisecond).UnixMilli() // < a quarter left
	run(t, f, Options{}, true, tk, "a", "b")
	if got := f.batches(); got != "a,b>end" {
		t.Fatalf("batches %q", got)
	}
	if len(f.beats) == 0 || f.beats[0].GetNodeId() != "b" {
		t.Fatalf("no heartbeat naming b before it ran: %v", f.beats)
	}
}

// A non-final AdvanceRun renews the lease for the next step; when that step's timeout is much
// shorter than the lease so far (60 s, then 150 ms), the step keeps its lease by heartbeats
// naming it, a third of 150 ms apart (see also TestKeepAliveWakesWhenARenewalShortensTheLease).
func TestLocalRunHeartbeatsAShorterNextStepInTime(t *testing.T) {
	f := newFake()
	f.beat = make(chan *wigglepb.HeartbeatRequest, 16)
	doc, version := flow(t, "a:task:default", "slow:task:default:150")
	f.graphs[version] = doc
	w := testWorker(f, Options{}, "a")
	w.advanceRun.Store(1)
	w.Register("slow", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		for range 2 {
			select {
			case hb := <-f.beat:
				if hb.GetNodeId() != "slow" {
					t.Errorf("heartbeat names %q, not the running step", hb.GetNodeId())
				}
			case <-time.After(5 * time.Second):
				t.Error("no heartbeat within 5 s under a 150 ms lease")
				return in, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return appendNode(ctx, in)
	})
	w.runTask(task(version, "a", lsync))
	if got := f.batches(); got != "a|slow>end" {
		t.Fatalf("batches %q", got)
	}
}

func TestUnimplementedAdvanceRunFallsBackToServerMode(t *testing.T) {
	f := newFake()
	f.advanceErr = status.Error(codes.Unimplemented, "no AdvanceRun here")
	doc, version := flow(t, "a:task:default", "b:task:default")
	f.graphs[version] = doc
	w := run(t, f, Options{}, false, task(version, "a", lsync), "a", "b")
	if len(f.completes) != 1 || f.completes[0].GetTaskId() != "t-a" {
		t.Fatalf("the refused step was not completed the SERVER way: %v", f.completes)
	}
	w.runTask(task(version, "b", lasync))
	if len(f.completes) != 2 || f.completes[1].GetTaskId() != "t-b" {
		t.Fatalf("a later task did not run in SERVER mode: %v", f.completes)
	}
	if string(f.completes[1].GetResult()) != `{"trail":["b"]}` {
		t.Errorf("result %s", f.completes[1].GetResult())
	}
}

func TestMissingDefinitionRunsServerStep(t *testing.T) {
	for _, name := range []string{"unavailable", "wrong bytes"} {
		t.Run(name, func(t *testing.T) {
			f := newFake()
			doc, version := flow(t, "a:task:default", "b:task:default")
			if name == "unavailable" {
				f.getDefErr = status.Error(codes.NotFound, "gone")
			} else {
				f.graphs[version] = append(doc, ' ') // hashes to another version
			}
			run(t, f, Options{}, true, task(version, "a", lsync), "a", "b")
			if len(f.advances) != 0 || len(f.completes) != 1 {
				t.Fatalf("advances %d completes %d", len(f.advances), len(f.completes))
			}
		})
	}
}

// A run that learns while running its first step that AdvanceRun is unimplemented (another run
// found out) reports that step with CompleteTask instead of trying AdvanceRun.
func TestFallbackLearnedMidStep(t *testing.T) {
	f := newFake()
	doc, version := flow(t, "a:task:default", "b:task:default")
	f.graphs[version] = doc
	w := testWorker(f, Options{}, "b")
	w.Register("a", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		w.advanceRun.Store(-1)
		return appendNode(ctx, in)
	})
	w.runTask(task(version, "a", lasync))
	if len(f.advances) != 0 || len(f.completes) != 1 {
		t.Fatalf("advances %d completes %d", len(f.advances), len(f.completes))
	}
}

// Every AdvanceRun of a run carries the next seq under its lease.
func TestLocalRunNumbersItsReports(t *testing.T) {
	f := newFake()
	doc, version := flow(t, "a:task:default", "b:task:default", "c:task:default")
	f.graphs[version] = doc
	run(t, f, Options{}, true, task(version, "a", lsync), "a", "b", "c")
	var seqs []int64
	for _, a := range f.advances {
		seqs = append(seqs, a.GetSeq())
	}
	if fmt.Sprint(seqs) != "[1 2 3]" {
		t.Errorf("seqs %v", seqs)
	}
}

// A report whose answer is lost is sent again unchanged, with the same seq; the run goes on.
func TestALostAnswerIsResentWithTheSameSeq(t *testing.T) {
	f := newFake()
	f.loseAnswers = 1
	doc, version := flow(t, "a:task:default", "b:task:default")
	f.graphs[version] = doc
	run(t, f, Options{}, true, task(version, "a", lsync), "a", "b")
	if got := f.batches(); got != "a|a|b>end" {
		t.Fatalf("batches %q, want the first one twice", got)
	}
	if f.advances[0].GetSeq() != 1 || f.advances[1].GetSeq() != 1 || f.advances[2].GetSeq() != 2 {
		t.Errorf("seqs %d %d %d", f.advances[0].GetSeq(), f.advances[1].GetSeq(), f.advances[2].GetSeq())
	}
}

// A lease lost while a step runs ends the run with no report at all: not even the size flush
// that the step's result would otherwise make due (docs/worker-protocol.md, "The loop").
func TestALeaseLostDuringAStepEndsTheRunWithoutASizeFlush(t *testing.T) {
	f := newFake()
	// 300 ms steps: heartbeats every 100 ms.
	doc, version := flow(t, "a:task:default:300", "b:task:default:300", "c:task:default:300")
	f.graphs[version] = doc
	w := testWorker(f, Options{}, "c")
	pad := strings.Repeat("x", 1200)
	w.Register("a", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.Marshal(map[string]string{"pad": pad})
	})
	w.Register("b", func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		f.mu.Lock()
		f.statusAfter = wigglepb.InstanceStatus_CANCELLED // the next heartbeat loses the lease
		f.mu.Unlock()
		select {
		case <-ctx.Done(): // the lease is lost: its handlers' context ends
		case <-time.After(10 * time.Second):
			t.Error("the lease was never lost")
		}
		return json.Marshal(map[string]string{"pad": pad})
	})
	w.advanceRun.Store(1)
	tk := task(version, "a", lasync)
	tk.TimeoutMs, tk.MaxRequestBytes = 300, 2000 // a's result and b's do not fit in one request
	w.runTask(tk)
	if got := f.batches(); got != "" {
		t.Fatalf("batches %q after the lease was lost, want none", got)
	}
}

// A report whose fate stays unknown for its whole resend window (every answer lost: applied,
// then UNAVAILABLE) is not followed by a release: the release would take the next seq of a
// lease whose report the server may have applied, and the server is unreachable anyway. The
// lease expires there (docs/worker-protocol.md; the Python and TypeScript workers alike).
func TestAReportNeverAnsweredIsNotFollowedByARelease(t *testing.T) {
	f := newFake()
	f.loseAnswers = 1 << 20
	doc, version := flow(t, "a:task:default")
	f.graphs[version] = doc
	tk := task(version, "a", lsync)
	tk.LeaseExpiresAtMs = time.Now().Add(500 * time.Millisecond).UnixMilli() // a 1 s window
	run(t, f, Options{}, true, tk, "a")
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.advances) < 2 {
		t.Fatalf("%d AdvanceRuns: the lost answer was not resent", len(f.advances))
	}
	for _, a := range f.advances {
		if a.GetSeq() != 1 {
			t.Errorf("an AdvanceRun resent with seq %d, want 1", a.GetSeq())
		}
	}
	if len(f.releases) != 0 {
		t.Errorf("released after a report of unknown fate: %v", f.releases)
	}
}
