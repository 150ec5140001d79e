// Package worker is Wiggle's Go pull worker: it long-polls the server for tasks on its queues,
// runs the handler registered under each task's activity name, and reports back. In SERVER mode
// it reports every step (CompleteTask / FailTask); in LOCAL_SYNC and LOCAL_ASYNC it chains the
// steps the handback rule (package traversal) allows and reports them through AdvanceRun.
//
//	w := worker.New(wigglepb.NewWiggleClient(conn), worker.Options{Queues: []string{"orders"}})
//	w.Register("validate", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) { ... })
//	w.RegisterPredicate("in_stock", func(ctx context.Context, in json.RawMessage) (bool, error) { ... })
//	err := w.Run(ctx) // until ctx ends, then drains
package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// Worker serves queues of one Wiggle server.
type Worker interface {
	// Register binds a task (or combine, or apply) activity. It panics on an empty name or a
	// name registered twice.
	Register(name string, fn Activity)
	// RegisterPredicate binds a predicate activity (filter, choice arm, loop while).
	RegisterPredicate(name string, fn Predicate)
	// Start begins polling in the background.
	Start() error
	// Close stops polling and drains: running steps finish and buffered local runs are handed
	// back. If ctx ends first, what is still held is dropped as in a crash (the leases expire
	// and the server redelivers) and ctx's error is returned. Close is idempotent.
	Close(ctx context.Context) error
	// Run starts the worker, serves until ctx ends, then drains with Close.
	Run(ctx context.Context) error
	// ID is the worker id the server records as lease owner.
	ID() string
	// ReserveEagerSlot reserves a slot for the eager first task of an instance this process
	// starts (StartInstance with EagerDispatch); nil when none is free. See EagerSlot.
	ReserveEagerSlot() EagerSlot
	// EagerDispatch is the StartInstanceRequest.eager this worker asks for: its id, queues
	// and activities.
	EagerDispatch() *wigglepb.EagerDispatch
}

type worker struct {
	opts  Options
	log   *slog.Logger
	rpc   *rpc
	reg   registry
	defs  *definitions
	slots chan struct{} // a semaphore of Concurrency slots, taken before a poll asks for tasks

	// advanceRun is 0 until the server first answers AdvanceRun, 1 once it did, -1 once it
	// answered UNIMPLEMENTED (from then on every task runs as a SERVER step).
	advanceRun atomic.Int32

	startOnce, closeOnce sync.Once
	started              atomic.Bool
	// draining closes when Close begins: local runs hand back with reason SHUTDOWN.
	draining chan struct{}
	// abortCtx ends when a drain gives up: runs drop their buffers, reports are abandoned.
	abortCtx context.Context
	abort    context.CancelFunc
	// pollCtx ends when polling must stop at once; cancelling it cancels the PollTasks call in
	// flight (only when the server cannot end it with EndPolls).
	pollCtx    context.Context
	stopPoll   context.CancelFunc
	pollerDone chan struct{}
	taskMu     sync.Mutex
	noNewTasks bool // set by Close before it waits for tasks; guarded by taskMu
	tasks      sync.WaitGroup
	closeErr   error
	newTimer   func(time.Duration) *time.Timer // time.NewTimer; tests watch keepAlive's waits
	// tracer makes a span per step attempt when the OTEL_* variables turn tracing on; nil off.
	tracer *stepTracer
}

// New makes a worker on client (wigglepb.NewWiggleClient of a connection, or a test double).
func New(client wigglepb.WiggleClient, opts Options) Worker {
	opts = opts.withDefaults()
	w := &worker{
		opts:       opts,
		log:        opts.Logger.With("worker", opts.WorkerID),
		slots:      make(chan struct{}, opts.Concurrency),
		draining:   make(chan struct{}),
		pollerDone: make(chan struct{}),
		newTimer:   time.NewTimer,
	}
	w.rpc = &rpc{client: client, token: opts.Token, timeout: opts.CallTimeout, log: w.log, outage: &outage{}}
	w.rpc.reports = newReports(w.rpc)
	w.defs = newDefinitions(w.rpc, w.log)
	w.abortCtx, w.abort = context.WithCancel(context.Background())
	w.pollCtx, w.stopPoll = context.WithCancel(w.abortCtx)
	w.tracer = newStepTracer(w.log)
	return w
}

func (w *worker) ID() string { return w.opts.WorkerID }

func (w *worker) Register(name string, fn Activity) {
	if fn == nil {
		panic("wiggle/worker: Register with a nil activity")
	}
	w.reg.add(name, handler{task: fn})
}

func (w *worker) RegisterPredicate(name string, fn Predicate) {
	if fn == nil {
		panic("wiggle/worker: RegisterPredicate with a nil predicate")
	}
	w.reg.add(name, handler{predicate: fn})
}

func (w *worker) Start() error {
	select {
	case <-w.draining:
		return errors.New("wiggle/worker: Start after Close")
	default:
	}
	w.startOnce.Do(func() {
		w.started.Store(true)
		go w.pollLoop()
		w.log.Info("worker serving", "queues", w.opts.Queues)
	})
	return nil
}

func (w *worker) Run(ctx context.Context) error {
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	return w.Close(context.WithoutCancel(ctx))
}

func (w *worker) Close(ctx context.Context) error {
	w.closeOnce.Do(func() {
		// Ordering: draining is announced before the polls end, so a task a poll returns in the
		// meantime is released unrun (ReleaseTask), not left leased.
		close(w.draining)
		w.endPolls()
		w.taskMu.Lock()
		w.noNewTasks = true
		w.taskMu.Unlock()
		done := make(chan struct{})
		go func() { w.tasks.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			// Runs notice the abort at their next check and drop their buffers; handlers see
			// their context cancelled. A handler that ignores it may still be running when
			// Close returns, but whatever it reports is refused: its RPCs use abortCtx.
			w.abort()
			w.closeErr = ctx.Err()
		}
		w.abort()
		if w.tracer != nil {
			w.tracer.shutdown() // buffered spans go out (two seconds at most)
		}
		w.log.Info("worker stopped")
	})
	return w.closeErr
}

func (w *worker) isDraining() bool {
	select {
	case <-w.draining:
		return true
	default:
		return false
	}
}
