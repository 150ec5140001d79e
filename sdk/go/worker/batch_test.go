package worker

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

var errStale = status.Error(codes.FailedPrecondition, "the lease on task 't1' is no longer held")

// waitUntil waits for cond, checked after every change a test makes happen; fails after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (b *reports) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// Reports made while a ReportBatch is in flight go together in the next one; a lone report goes
// at once. Every report travels in a ReportBatch, none in its own RPC.
func TestReportsOfConcurrentTasksShareReportBatchCalls(t *testing.T) {
	f := newFake()
	hold := make(chan struct{})
	f.holdBatch = hold
	w := testWorker(f, Options{Concurrency: 4}, "a")
	var wg sync.WaitGroup
	run := func(n int) {
		defer wg.Done()
		tk := task("v1", "a", wigglepb.ExecutionMode_SERVER)
		tk.TaskId = fmt.Sprintf("t-%d", n)
		w.runTask(tk)
	}
	wg.Add(1)
	go run(0)
	waitUntil(t, "the first report's batch is in flight", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.batchSizes) == 1
	})
	for n := 1; n < 4; n++ {
		wg.Add(1)
		go run(n)
	}
	waitUntil(t, "three reports wait for the next batch", func() bool { return w.rpc.reports.queued() == 3 })
	close(hold)
	wg.Wait()
	if fmt.Sprint(f.batchSizes) != "[1 3]" {
		t.Errorf("ReportBatch sizes %v, want [1 3]", f.batchSizes)
	}
	if len(f.completes) != 4 || f.viaBatch != 4 {
		t.Errorf("%d completes, %d of them in batches; want 4 and 4", len(f.completes), f.viaBatch)
	}
}

// A server without ReportBatch gets one RPC per report, and is asked only once.
func TestWithoutReportBatchEachReportIsItsOwnRPC(t *testing.T) {
	f := newFake()
	f.noReportBatch = true
	w := testWorker(f, Options{}, "a")
	for n := 0; n < 3; n++ {
		w.runTask(task("v1", "a", wigglepb.ExecutionMode_SERVER))
	}
	if len(f.completes) != 3 || f.viaBatch != 0 {
		t.Errorf("%d completes, %d in batches; want 3 and 0", len(f.completes), f.viaBatch)
	}
	if got := w.rpc.reports.calls.Load(); got != 1 {
		t.Errorf("ReportBatch tried %d times, want once", got)
	}
}

// A report refused inside a batch comes back as the error its own RPC would have been.
func TestAReportRefusedInABatchIsItsOwnRPCsError(t *testing.T) {
	f := newFake()
	f.advanceErr = errStale
	w := testWorker(f, Options{}, "a")
	_, err := w.rpc.reports.AdvanceRun(t.Context(), &wigglepb.AdvanceRunRequest{TaskId: "t1", Lease: "l1", Seq: 1})
	if err == nil || err.Error() != errStale.Error() {
		t.Errorf("got %v, want %v", err, errStale)
	}
	if f.viaBatch != 1 {
		t.Errorf("%d reports in batches, want 1", f.viaBatch)
	}
}
