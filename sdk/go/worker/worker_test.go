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

// A step that outlasts its lease keeps it by heartbeats: the step waits for two of them (each
// naming it), which come about a third of a lease apart.
func TestHeartbeatsKeepALongStepAlive(t *testing.T) {
	f := newFake()
	f.beat = make(chan *wigglepb.HeartbeatRequest, 16)
	w := testWorker(f, Options{})
	w.Register("slow", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		for range 2 {
			select {
			case hb := <-f.beat:
				if hb.GetNodeId() != "slow" {
					t.Errorf("heartbeat names %q, not the running step", hb.GetNodeId())
				}
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return in, nil
	})
	tk := task("v1", "slow", wigglepb.ExecutionMode_SERVER)
	tk.TimeoutMs = 150
	tk.LeaseExpiresAtMs = time.Now().Add(150 * time.Millisecond).UnixMilli()
	w.runTask(tk)
	if len(f.completes) != 1 {
		t.Errorf("step not completed")
	}
}

// A renewal for a shorter step (a non-final AdvanceRun before a step with a short timeout) wakes
// the heartbeat loop, which was asleep for a third of the longer lease: the next heartbeat is
// due a third of the new length after the renewal. Before, the loop slept its old wait out (20 s
// here) and a 150 ms lease lapsed under the step.
func TestKeepAliveWakesWhenARenewalShortensTheLease(t *testing.T) {
	waits := make(chan time.Duration, 16)
	w := testWorker(newFake(), Options{})
	w.newTimer = func(d time.Duration) *time.Timer {
		waits <- d
		return time.NewTimer(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := newLease(task("v1", "a", wigglepb.ExecutionMode_LOCAL_SYNC), cancel) // a 60 s lease
	go w.keepAlive(ctx, l)
	if d := <-waits; d < 10*time.Second {
		t.Fatalf("first wait %v; want about a third of 60 s", d)
	}
	now := time.Now().UnixMilli()
	l.renewed(now+150, now, 150*time.Millisecond)
	select {
	case d := <-waits:
		if d > 50*time.Millisecond {
			t.Fatalf("after the renewal the loop waits %v; want at most a third of 150 ms", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the heartbeat loop slept on past a renewal for a shorter lease")
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
	<-w.draining // Close has begun draining: b finishes, c never starts
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
	running := make(chan struct{})
	w.Register("stuck", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		close(running)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	f.queue = append(f.queue, task("v1", "stuck", wigglepb.ExecutionMode_SERVER))
	_ = w.Start()
	<-running
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
	f.completed = make(chan struct{}, 1)
	w := testWorker(f, Options{PollWait: 20 * time.Millisecond}, "a")
	_ = w.Start()
	defer w.Close(context.Background())
	select {
	case <-f.completed:
	case <-time.After(30 * time.Second):
		t.Fatal("task not run after the server came back")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.polls) < 1 || len(f.pollErrs) != 0 {
		t.Errorf("%d polls answered, %d errors left", len(f.polls), len(f.pollErrs))
	}
}

// The poll loop's pauses after failures grow from 100 ms, doubling, jittered by ±20%, up to 5 s.
func TestBackoffGrowsToItsCap(t *testing.T) {
	var b backoff
	want := 100 * time.Millisecond
	for range 10 {
		d := b.next()
		if d < want*8/10 || d > want*12/10 {
			t.Fatalf("delay %s, want %s ±20%%", d, want)
		}
		want = min(5*time.Second, want*2)
	}
	b.reset()
	if d := b.next(); d > 120*time.Millisecond {
		t.Errorf("after a reset the delay is %s", d)
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

// A drain ends the open poll with EndPolls (never cancelling it), and a task that poll still
// brings back is given back unrun with ReleaseTask, reason shutdown.
func TestDrainEndsPollsAndReleasesWhatTheyBring(t *testing.T) {
	f := newFake()
	late := task("v1", "a", wigglepb.ExecutionMode_SERVER)
	f.onEnd = []*wigglepb.Task{late}
	w := testWorker(f, Options{PollWait: time.Minute}, "a")
	_ = w.Start()
	waitPolled(t, f)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.completes) != 0 {
		t.Errorf("a task received during the drain was run")
	}
	if len(f.releases) != 1 || f.releases[0].GetReason() != "shutdown" || f.releases[0].GetSeq() != 1 ||
		f.releases[0].GetLease() != late.GetLease() {
		t.Fatalf("releases %v, want the late task given back with reason shutdown, seq 1", f.releases)
	}
}

// An older server without EndPolls: the poll is cancelled instead, and Close still returns.
func TestDrainWithoutEndPollsCancelsThePoll(t *testing.T) {
	f := newFake()
	f.noEndPolls = true
	w := testWorker(f, Options{PollWait: time.Minute}, "a")
	_ = w.Start()
	waitPolled(t, f)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func waitPolled(t *testing.T, f *fakeServer) {
	t.Helper()
	select {
	case <-f.polled:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never polled")
	}
}

// PollTasks says who the worker is: its activities (sorted), slots and SDK.
func TestPollCarriesTheWorkersIdentity(t *testing.T) {
	f := newFake()
	w := testWorker(f, Options{Concurrency: 3, PollWait: time.Minute, Queues: []string{"q"}}, "b", "a")
	w.RegisterPredicate("p", func(context.Context, json.RawMessage) (bool, error) { return true, nil })
	_ = w.Start()
	waitPolled(t, f)
	_ = w.Close(context.Background())
	p := f.polls[0]
	if strings.Join(p.GetActivities(), ",") != "a,b,p" || p.GetSlots() != 3 || p.GetSdk() != SDK ||
		strings.Join(p.GetQueues(), ",") != "q" || p.GetWorkerId() != w.ID() {
		t.Errorf("poll %v", p)
	}
}

// In SERVER mode CompleteTask asks for the instance's next task and the worker runs it on the
// same slot; each lease numbers its own reports from 1.
func TestCompleteTaskAsksForNextAndRunsIt(t *testing.T) {
	f := newFake()
	w := testWorker(f, Options{}, "a", "b")
	next := task("v1", "b", wigglepb.ExecutionMode_SERVER)
	next.Lease = "l2"
	f.nextTask = next
	w.runTask(task("v1", "a", wigglepb.ExecutionMode_SERVER))
	if len(f.completes) != 2 {
		t.Fatalf("%d completes; the next task was not run", len(f.completes))
	}
	first, second := f.completes[0], f.completes[1]
	if n := first.GetNext(); n == nil || n.GetWorkerId() != w.ID() || strings.Join(n.GetActivities(), ",") != "a,b" {
		t.Errorf("CompleteTask did not ask for next: %v", n)
	}
	if first.GetSeq() != 1 || second.GetSeq() != 1 || second.GetLease() != "l2" {
		t.Errorf("seqs %d, %d (lease %s)", first.GetSeq(), second.GetSeq(), second.GetLease())
	}
}

// A result over the server's payload limit, or nested deeper than 128, fails the step at once,
// non-retryably, naming the limit.
func TestOverLimitResultsFailNonRetryably(t *testing.T) {
	f := newFake()
	w := testWorker(f, Options{})
	w.Register("big", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`"` + strings.Repeat("x", 100) + `"`), nil
	})
	w.Register("deep", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(strings.Repeat("[", 129) + strings.Repeat("]", 129)), nil
	})
	big := task("v1", "big", wigglepb.ExecutionMode_SERVER)
	big.MaxPayloadBytes = 64
	w.runTask(big)
	w.runTask(task("v1", "deep", wigglepb.ExecutionMode_SERVER))
	if len(f.fails) != 2 || len(f.completes) != 0 {
		t.Fatalf("fails %d completes %d", len(f.fails), len(f.completes))
	}
	for i, want := range []string{"102 bytes; the limit is 64 bytes", "nests 129 levels deep; the limit is 128"} {
		fl := f.fails[i].GetFailure()
		if !strings.Contains(fl.GetMessage(), want) || !fl.GetNonRetryable() {
			t.Errorf("failure %v, want %q, non-retryable", fl, want)
		}
	}
}
