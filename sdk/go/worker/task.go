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

// runTask runs one leased task to its report: a single SERVER step, or a local run. It never
// fails: problems are logged, and the lease then expires and the server redelivers.
func (w *worker) runTask(t *wigglepb.Task) {
	// Handlers run under ctx: it ends when the lease is lost (the instance is cancelled, say)
	// or the worker gives up draining.
	ctx, cancel := context.WithCancel(w.abortCtx)
	defer cancel()
	l := newLease(t, cancel)
	go w.keepAlive(ctx, l)
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("task crashed in the worker", "task", t.GetTaskId(), "node", t.GetNodeId(), "panic", p)
		}
	}()
	if g := w.localGraph(ctx, t); g != nil {
		newLocalRun(w, t, g, l).run(ctx)
		return
	}
	w.serverStep(ctx, t, l)
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
func (w *worker) serverStep(ctx context.Context, t *wigglepb.Task, l *lease) {
	info := stepInfo(t, t.GetNodeId(), t.GetActivity(), int(t.GetAttempt()), graph.ModeServer)
	h, ok := w.reg.get(t.GetActivity())
	out := runHandler(WithStep(ctx, info), h, ok, t.GetActivity(), t.GetInput(), false)
	w.reportSingle(ctx, t, l, out)
}

func (w *worker) reportSingle(ctx context.Context, t *wigglepb.Task, l *lease, out outcome) {
	if why := l.lost(); why != "" {
		w.log.Info("task dropped", "task", t.GetTaskId(), "why", why)
		return
	}
	var err error
	if f := out.failure; f != nil {
		_, err = call(ctx, w.rpc, retryWindow(l), w.rpc.client.FailTask, &wigglepb.FailTaskRequest{
			TaskId: t.GetTaskId(), Lease: t.GetLease(), Failure: f.proto(),
		})
	} else {
		result := []byte(out.context)
		if out.predicate != nil { // a predicate's value, reported in SERVER form
			result = []byte(fmt.Sprint(*out.predicate))
		}
		_, err = call(ctx, w.rpc, retryWindow(l), w.rpc.client.CompleteTask, &wigglepb.CompleteTaskRequest{
			TaskId: t.GetTaskId(), Lease: t.GetLease(), Result: result,
		})
	}
	if err != nil {
		w.logRefused("report", t, err)
	}
}

// logRefused logs a refused report: quietly when the task is simply not ours any more.
func (w *worker) logRefused(what string, t *wigglepb.Task, err error) {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.NotFound, codes.Canceled:
		w.log.Info(what+" refused", "task", t.GetTaskId(), "err", err)
	default:
		w.log.Error(what+" refused", "task", t.GetTaskId(), "err", err)
	}
}

// retryWindow is how long a report is retried while the server is unreachable: retrying past
// the lease's end is pointless, the task then belongs to someone else.
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
