package worker

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

func TestServerStepCompletes(t *testing.T) {
	f := newFake()
	w := testWorker(f, Options{Token: "s3cret"}, "a")
	var seen StepInfo
	w.RegisterPredicate("p", func(ctx context.Context, _ json.RawMessage) (bool, error) {
		seen, _ = Step(ctx)
		return true, nil
	})
	w.runTask(task("v1", "a", wigglepb.ExecutionMode_SERVER))
	pt := task("v1", "p", wigglepb.ExecutionMode_SERVER)
	pt.Attempt = 2
	w.runTask(pt)
	if len(f.completes) != 2 || len(f.advances) != 0 {
		t.Fatalf("completes %d advances %d", len(f.completes), len(f.advances))
	}
	if got := string(f.completes[0].GetResult()); got != `{"trail":["a"]}` {
		t.Errorf("result %s", got)
	}
	if got := string(f.completes[1].GetResult()); got != "true" {
		t.Errorf("a predicate completes with JSON true, got %s", got)
	}
	want := StepInfo{InstanceID: "i1", NodeID: "p", Attempt: 2, Flow: "f", Version: "v1",
		Activity: "p", ExecutionMode: "SERVER", TaskID: "t-p"}
	if seen != want {
		t.Errorf("step info %+v, want %+v", seen, want)
	}
	for _, a := range f.auth {
		if a != "Bearer s3cret" {
			t.Errorf("call without the bearer token: %q", a)
		}
	}
}

func TestServerStepFailures(t *testing.T) {
	f := newFake()
	w := testWorker(f, Options{})
	w.Register("retry", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, errors.New("flaky")
	})
	w.Register("fatal", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, NonRetryable(errors.New("card stolen"))
	})
	w.Register("panics", func(context.Context, json.RawMessage) (json.RawMessage, error) { panic("boom") })
	w.Register("notjson", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage("{nope"), nil
	})
	for _, name := range []string{"retry", "fatal", "panics", "notjson", "unknown"} {
		w.runTask(task("v1", name, wigglepb.ExecutionMode_SERVER))
	}
	want := []struct {
		msg      string
		terminal bool
	}{
		{"flaky", false}, {"card stolen", true}, {"panic: boom", false},
		{"returned a value that is not JSON", false}, {"no activity named 'unknown'", false},
	}
	if len(f.fails) != len(want) {
		t.Fatalf("%d failures reported, want %d", len(f.fails), len(want))
	}
	for i, w := range want {
		fl := f.fails[i].GetFailure()
		if !strings.Contains(fl.GetMessage(), w.msg) || fl.GetNonRetryable() != w.terminal {
			t.Errorf("failure %d: %v, want %q non_retryable=%v", i, fl, w.msg, w.terminal)
		}
	}
}

func TestHeartbeatsKeepALongStepAlive(t *testing.T) {
	f := newFake()
	w := testWorker(f, Options{})
	w.Register("slow", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		time.Sleep(350 * time.Millisecond)
		return in, nil
	})
	tk := task("v1", "slow", wigglepb.ExecutionMode_SERVER)
	tk.TimeoutMs = 150
	tk.LeaseExpiresAtMs = time.Now().Add(150 * time.Millisecond).UnixMilli()
	w.runTask(tk)
	if f.heartbeats < 2 {
		t.Errorf("%d heartbeats during a step of 2+ lease lengths", f.heartbeats)
	}
	if len(f.completes) != 1 {
		t.Errorf("step not completed")
	}
}

func TestLostLeaseCancelsTheStep(t *testing.T) {
	f := newFake()
	f.statusAfter = wigglepb.InstanceStatus_CANCELLED
	w := testWorker(f, Options{})
	cancelled := make(chan bool, 1)
	w.Register("slow", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		select {
		case <-ctx.Done():
			cancelled <- true
			return nil, ctx.Err()
		case <-time.After(2 * time.Second):
			cancelled <- false
			return in, nil
		}
	})
	tk := task("v1", "slow", wigglepb.ExecutionMode_SERVER)
	tk.TimeoutMs = 90
	w.runTask(tk)
	if !<-cancelled {
		t.Error("the handler's context was not cancelled when the instance stopped running")
	}
	if len(f.completes)+len(f.fails) != 0 {
		t.Error("a step of a cancelled instance was reported")
	}
}

// TestPollAndDrain runs the whole worker: tasks arrive through PollTasks, and Close during a
// LOCAL_ASYNC run hands back its buffer with reason shutdown.
func TestPollAndDrain(t *testing.T) {
	f := newFake()
	doc, version := flow(t, "a:task:default", "b:task:default", "c:task:default")
	f.graphs[version] = doc
	w := testWorker(f, Options{Concurrency: 2, PollWait: 50 * time.Millisecond}, "a", "c")
	inB := make(chan struct{})
	release := make(chan struct{})
	w.Register("b", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		close(inB)
		<-release
		return appendNode(ctx, in)
	})
	w.advanceRun.Store(1)
	f.mu.Lock()
	f.queue = append(f.queue, task(version, "a", lasync))
	f.mu.Unlock()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	<-inB
	closed := make(chan error)
	go func() { closed <- w.Close(context.Background()) }()
	time.Sleep(50 * time.Millisecond) // Close has begun draining: b finishes, c never starts
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := f.batches(); got != "a,b>shutdown" {
		t.Errorf("batches %q, want the buffer handed back at shutdown", got)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Start(); err == nil {
		t.Error("Start after Close must fail")
	}
}

func TestCloseGivesUpAtItsDeadline(t *testing.T) {
	f := newFake()
	w := testWorker(f, Options{PollWait: 20 * time.Millisecond})
	w.Register("stuck", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	f.queue = append(f.queue, task("v1", "stuck", wigglepb.ExecutionMode_SERVER))
	_ = w.Start()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := w.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v", err)
	}
}

// TestPollRetriesWhileUnreachable: an unreachable server (and a refusal) costs backoff, not the
// poll loop; the task is run once the server answers.
func TestPollRetriesWhileUnreachable(t *testing.T) {
	f := newFake()
	f.pollErrs = []error{
		status.Error(codes.Unavailable, "down"),
		status.Error(codes.Unavailable, "still down"),
		status.Error(codes.Internal, "oops"),
	}
	f.queue = []*wigglepb.Task{task("v1", "a", wigglepb.ExecutionMode_SERVER)}
	w := testWorker(f, Options{PollWait: 20 * time.Millisecond}, "a")
	start := time.Now()
	_ = w.Start()
	defer w.Close(context.Background())
	for {
		f.mu.Lock()
		n := len(f.completes)
		f.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("task not run after the server came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("three failed polls took only %s: no backoff", d)
	}
}

func TestEagerSlot(t *testing.T) {
	f := newFake()
	w := testWorker(f, Options{Concurrency: 1}, "a")
	if w.ReserveEagerSlot() != nil {
		t.Fatal("a slot reserved before Start")
	}
	startedWithoutPolling(w)
	slot := w.ReserveEagerSlot()
	if slot == nil {
		t.Fatal("no slot on an idle worker")
	}
	if w.ReserveEagerSlot() != nil {
		t.Fatal("a second slot with concurrency 1")
	}
	slot.Dispatch(task("v1", "a", wigglepb.ExecutionMode_SERVER))
	slot.Release() // a no-op after Dispatch
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(f.completes) != 1 {
		t.Fatalf("the eager task was not run and drained: %d completes", len(f.completes))
	}
	if w.ReserveEagerSlot() != nil {
		t.Fatal("a slot reserved after Close")
	}
	released := testWorker(f, Options{Concurrency: 1})
	startedWithoutPolling(released)
	released.ReserveEagerSlot().Release()
	if released.ReserveEagerSlot() == nil {
		t.Fatal("Release did not give the slot back")
	}
}

// startedWithoutPolling marks w started without its poll loop, which would hold the only slot
// while it long-polls.
func startedWithoutPolling(w *worker) {
	w.started.Store(true)
	close(w.pollerDone)
}
