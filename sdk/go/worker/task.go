package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/graph"
	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

var modes = map[wigglepb.ExecutionMode]graph.ExecutionMode{
	wigglepb.ExecutionMode_SERVER:      graph.ModeServer,
	wigglepb.ExecutionMode_LOCAL_SYNC:  graph.ModeLocalSync,
	wigglepb.ExecutionMode_LOCAL_ASYNC: graph.ModeLocalAsync,
}

// runTask runs one leased task to its report, then every task a report brought back
// (CompleteTask's `next`) on the same slot. It never fails: problems are logged, and a lease the
// worker cannot report on is released, or expires and the server redelivers.
func (w *worker) runTask(t *wigglepb.Task) {
	for t != nil {
		t = w.runOne(t)
	}
}

// runOne runs t (a SERVER step or a local run); the next task the server leased to this worker
// in the same transaction, if any.
func (w *worker) runOne(t *wigglepb.Task) (next *wigglepb.Task) {
	// Handlers run under ctx: it ends when the lease is lost (the instance is cancelled, say)
	// or the worker gives up draining.
	ctx, cancel := context.WithCancel(w.abortCtx)
	defer cancel()
	w.rpc.reports.noteLimit(t.GetMaxRequestBytes()) // no ReportBatch is built larger
	l := newLease(t, cancel)
	go w.keepAlive(ctx, l)
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("task crashed in the worker", "task", t.GetTaskId(), "node", t.GetNodeId(), "panic", p)
		}
	}()
	if g := w.localGraph(ctx, t); g != nil {
		newLocalRun(w, t, g, l).run(ctx)
		return nil
	}
	next = w.serverStep(ctx, t, l)
	if next != nil && w.isDraining() {
		// Leased to us while we began to drain: give it back unrun, no attempt consumed. Under
		// abortCtx: ctx ends with t's lease, which the report that brought next has ended.
		w.release(w.abortCtx, next, newLease(next, nil), "shutdown")
		return nil
	}
	return next
}

// localGraph is the graph to chain on, or nil to run the task as one SERVER step.
func (w *worker) localGraph(ctx context.Context, t *wigglepb.Task) *graph.Graph {
	m := t.GetExecutionMode()
	if m != wigglepb.ExecutionMode_LOCAL_SYNC && m != wigglepb.ExecutionMode_LOCAL_ASYNC {
		return nil
	}
	if w.advanceRun.Load() < 0 {
		return nil
	}
	g := w.defs.get(ctx, t.GetFlow(), t.GetVersion())
	if g == nil {
		return nil
	}
	if n := g.Nodes[t.GetNodeId()]; n == nil || !n.IsWorkerStep() {
		w.log.Warn("task is at a node a worker does not run; running it as a SERVER step",
			"task", t.GetTaskId(), "node", t.GetNodeId())
		return nil
	}
	return g
}

func stepInfo(t *wigglepb.Task, node, activity string, attempt int, mode graph.ExecutionMode) StepInfo {
	return StepInfo{
		InstanceID: t.GetInstanceId(), NodeID: node, Attempt: attempt, Flow: t.GetFlow(),
		Version: t.GetVersion(), Activity: activity, ExecutionMode: mode, TaskID: t.GetTaskId(),
	}
}

// serverStep runs the one step of a SERVER task, then CompleteTask or FailTask. Without the
// graph the worker cannot tell a predicate from a task; a predicate's bool encodes as JSON
// true / false, which is exactly what CompleteTask expects for it.
func (w *worker) serverStep(ctx context.Context, t *wigglepb.Task, l *lease) *wigglepb.Task {
	info := stepInfo(t, t.GetNodeId(), t.GetActivity(), int(t.GetAttempt()), graph.ModeServer)
	h, ok := w.reg.get(t.GetActivity())
	step := func(ctx context.Context) outcome {
		return runHandler(WithStep(ctx, info), h, ok, t.GetActivity(), t.GetInput(), false)
	}
	var out outcome
	if w.tracer == nil {
		out = step(ctx)
	} else {
		out, _ = w.tracer.run(ctx, t, stepSpan{
			node: t.GetNodeId(), activity: t.GetActivity(), mode: string(graph.ModeServer),
			attempt: int(t.GetAttempt()), loops: loopsOf(t),
		}, step)
	}
	return w.reportSingle(t, l, checkLimits(out, t.GetMaxPayloadBytes()), true)
}

// reportSingle reports one step with CompleteTask or FailTask; with wantNext (and not draining)
// CompleteTask asks for the instance's next task, which it returns.
//
// The report is sent under abortCtx, not the step's context: that one ends when the lease is
// lost, and the report itself ends the lease. A heartbeat that reaches the server after the
// report was applied, its answer still on the way, is refused and loses the lease; were the call
// cancelled then, the answer's next task, leased to this worker, would be dropped and sit unrun
// until its lease expired. A report of a lease that really was lost is refused by the server.
func (w *worker) reportSingle(t *wigglepb.Task, l *lease, out outcome, wantNext bool) *wigglepb.Task {
	ctx := w.abortCtx
	if why := l.lost(); why != "" {
		w.log.Info("task dropped", "task", t.GetTaskId(), "why", why)
		return nil
	}
	seq := l.nextSeq()
	var err error
	var next *wigglepb.Task
	if f := out.failure; f != nil {
		_, err = callReport(ctx, w.rpc, retryWindow(l), w.rpc.reports.FailTask, &wigglepb.FailTaskRequest{
			TaskId: t.GetTaskId(), Lease: t.GetLease(), Failure: f.proto(), Seq: seq,
		})
	} else {
		result := []byte(out.context)
		if out.predicate != nil { // a predicate's value, reported in SERVER form
			result = []byte(fmt.Sprint(*out.predicate))
		}
		req := &wigglepb.CompleteTaskRequest{TaskId: t.GetTaskId(), Lease: t.GetLease(), Result: result, Seq: seq}
		if wantNext && !w.isDraining() {
			req.Next = w.eagerDispatch()
		}
		var resp *wigglepb.TaskReportResponse
		resp, err = callReport(ctx, w.rpc, retryWindow(l), w.rpc.reports.CompleteTask, req)
		next = resp.GetNextTask()
	}
	if err != nil {
		w.refused(ctx, "report", t, l, err)
		return nil
	}
	l.applied(seq)
	return next
}

// refused handles a report the server did not apply: quietly when the task is simply not ours
// any more; otherwise the lease may still be ours, so the task is released at once (the
// refused report's seq is still free) rather than left to expire. A report whose fate stayed
// unknown for its whole resend window is not followed by a release: the server may have
// applied it (a lost answer), so its seq is not free, and the server is unreachable anyway.
// The lease expires there, as in the Python and TypeScript workers.
func (w *worker) refused(ctx context.Context, what string, t *wigglepb.Task, l *lease, err error) {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.NotFound:
		w.log.Info(what+" refused: the lease is not ours", "task", t.GetTaskId(), "err", err)
		return
	case codes.Canceled:
		return // the worker gave up draining: behave like a crash
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		w.log.Error(what+" not delivered within its lease", "task", t.GetTaskId(), "err", err)
		return
	}
	w.log.Error(what+" refused", "task", t.GetTaskId(), "err", err)
	w.release(ctx, t, l, "report refused")
}

// release gives a leased task back without a result: READY again at the same attempt.
func (w *worker) release(ctx context.Context, t *wigglepb.Task, l *lease, reason string) {
	seq := l.nextSeq()
	_, err := callReport(ctx, w.rpc, retryWindow(l), w.rpc.reports.ReleaseTask, &wigglepb.ReleaseTaskRequest{
		TaskId: t.GetTaskId(), Lease: t.GetLease(), Seq: seq, Reason: reason,
	})
	switch {
	case err == nil:
		l.applied(seq)
		w.log.Info("task released", "task", t.GetTaskId(), "reason", reason)
	case status.Code(err) == codes.Unimplemented:
		w.log.Info("the server cannot release tasks; the lease will expire", "task", t.GetTaskId())
	default:
		w.log.Info("release refused", "task", t.GetTaskId(), "err", err)
	}
}

// eagerDispatch asks for a task leased to this worker in the same transaction as the call.
func (w *worker) eagerDispatch() *wigglepb.EagerDispatch {
	return &wigglepb.EagerDispatch{WorkerId: w.opts.WorkerID, Queues: w.opts.Queues, Activities: w.reg.names()}
}

// retryWindow is how long a report is resent while its fate is unknown: past the lease's end
// the task belongs to someone else.
func retryWindow(l *lease) time.Duration {
	return max(time.Second, l.remaining())
}

func (f *failure) proto() *wigglepb.StepFailure {
	return &wigglepb.StepFailure{Message: f.message, NonRetryable: f.nonRetryable, ErrorType: f.errorType}
}

func stepResult(node string, out outcome) *wigglepb.StepResult {
	r := &wigglepb.StepResult{NodeId: node}
	switch {
	case out.failure != nil:
		r.Outcome = &wigglepb.StepResult_Failure{Failure: out.failure.proto()}
	case out.predicate != nil:
		r.Outcome = &wigglepb.StepResult_Predicate{Predicate: *out.predicate}
	default:
		r.Outcome = &wigglepb.StepResult_Context{Context: out.context}
	}
	return r
}

func outcomeOf(r *wigglepb.StepResult) outcome {
	switch o := r.GetOutcome().(type) {
	case *wigglepb.StepResult_Failure:
		f := o.Failure
		return outcome{failure: &failure{f.GetMessage(), f.GetNonRetryable(), f.GetErrorType()}}
	case *wigglepb.StepResult_Predicate:
		v := o.Predicate
		return outcome{predicate: &v}
	case *wigglepb.StepResult_Context:
		return outcome{context: json.RawMessage(o.Context)}
	}
	return outcome{context: json.RawMessage("null")}
}
