package worker

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/graph"
	"github.com/wiggle-engine/wiggle/sdk/go/traversal"
	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// localRun is one local run, from a leased task to its handback.
//
// It starts at the leased node and keeps executing nodes itself while the handback rule says
// the next node is a step this worker may run, reporting through AdvanceRun: after every step
// in LOCAL_SYNC; in LOCAL_ASYNC at handback, right after a checkpoint step, and whenever
// LocalBatchSize results are buffered. Between steps it checks whether the worker is draining
// (hand back with reason shutdown, flushing the buffer), whether the lease was lost (abandon:
// the server would refuse the results anyway) and whether enough lease is left.
//
// What a crash costs follows from when results reach the server: one step in LOCAL_SYNC,
// everything buffered since the last flush in LOCAL_ASYNC.
type localRun struct {
	w        *worker
	t        *wigglepb.Task
	g        *graph.Graph
	l        *lease
	mode     graph.ExecutionMode
	buffer   []*wigglepb.StepResult
	flushes  int
	handback string // why the run ended, for logs and tests
	// nextTimeoutMs is the timeout of the node a non-final flush moves the token to.
	nextTimeoutMs int64
}

func newLocalRun(w *worker, t *wigglepb.Task, g *graph.Graph, l *lease) *localRun {
	return &localRun{w: w, t: t, g: g, l: l, mode: modes[t.GetExecutionMode()]}
}

func (r *localRun) run(ctx context.Context) {
	t, g, w := r.t, r.g, r.w
	nodeID, activity, attempt := t.GetNodeId(), t.GetActivity(), int(t.GetAttempt())
	in := json.RawMessage(t.GetInput())
	loopCounts := map[string]int{}
	if len(t.GetLoopCounts()) > 0 {
		if err := json.Unmarshal(t.GetLoopCounts(), &loopCounts); err != nil {
			w.log.Warn("task has unreadable loop counts; treating them as empty", "task", t.GetTaskId(), "err", err)
		}
	}
	for {
		node := g.Nodes[nodeID]
		isPredicate := node.Kind == graph.KindPredicate
		h, found := w.reg.get(activity)
		info := stepInfo(t, nodeID, activity, attempt, r.mode)
		out := runHandler(WithStep(ctx, info), h, found, activity, in, isPredicate)
		r.buffer = append(r.buffer, stepResult(nodeID, out))
		if out.failure != nil {
			// The successful prefix and the failure go together, so the server applies the
			// prefix and then the step's retry policy in one transaction.
			r.finish(ctx, traversal.StepFailed)
			return
		}
		move, err := traversal.Advance(g, nodeID, w.opts.Queues, out.predicate, loopCounts)
		if err != nil { // not reachable: only worker steps are ever run here
			w.log.Error("traversal refused a step", "task", t.GetTaskId(), "node", nodeID, "err", err)
			r.finish(ctx, traversal.StepFailed)
			return
		}
		reason := move.Handback
		if reason == traversal.None {
			var abandon bool
			if reason, abandon = r.betweenSteps(ctx); abandon {
				return
			}
		}
		if reason != traversal.None {
			r.finish(ctx, reason)
			return
		}
		if r.mustFlush(node) {
			r.nextTimeoutMs = g.Nodes[move.Next].TimeoutMs
			resp := r.flush(ctx, false, "")
			if resp == nil || !resp.GetKeepGoing() {
				return
			}
		}
		if !isPredicate {
			in = out.context
		}
		nodeID = move.Next
		activity = g.Nodes[nodeID].Activity
		attempt = 1
		loopCounts = move.LoopCounts
	}
}

// betweenSteps is why not to start another step: a drain or a spent lease budget; abandon
// when the lease is lost or the worker gave up draining (behave like a crash).
func (r *localRun) betweenSteps(ctx context.Context) (traversal.Handback, bool) {
	if why := r.l.lost(); why != "" {
		r.w.log.Info("local run abandoned", "task", r.t.GetTaskId(), "why", why)
		r.handback = string(traversal.NotRunning)
		return traversal.None, true
	}
	if ctx.Err() != nil {
		r.handback = "aborted"
		return traversal.None, true
	}
	if r.w.isDraining() {
		return traversal.Shutdown, false
	}
	if !traversal.LeaseBudgetLeft(r.l.remaining().Milliseconds(), r.l.lengthNow().Milliseconds()) {
		return traversal.LeaseBudget, false
	}
	return traversal.None, false
}

func (r *localRun) mustFlush(node *graph.Node) bool {
	switch {
	case r.mode == graph.ModeLocalSync:
		return true
	case node.Kind == graph.KindTask && node.Checkpoint:
		return true
	case len(r.buffer) >= r.w.opts.LocalBatchSize:
		return true
	}
	// Until the server has answered one AdvanceRun we do not know it implements it; report the
	// first step alone so that an UNIMPLEMENTED answer can still fall back to CompleteTask for
	// exactly that step. (-1: another run found out while this one ran its first step; flush
	// then reports that step the SERVER way.)
	return r.w.advanceRun.Load() != 1
}

func (r *localRun) finish(ctx context.Context, reason traversal.Handback) {
	r.handback = string(reason)
	r.flush(ctx, true, reason)
}

// flush sends the buffer; nil when the run must stop (refused, not RUNNING, fallen back).
func (r *localRun) flush(ctx context.Context, final bool, reason traversal.Handback) *wigglepb.AdvanceRunResponse {
	if r.w.advanceRun.Load() < 0 && r.flushes == 0 && len(r.buffer) == 1 {
		r.fallBack(ctx)
		return nil
	}
	resp, err := call(ctx, r.w.rpc, retryWindow(r.l), r.w.rpc.client.AdvanceRun, &wigglepb.AdvanceRunRequest{
		TaskId:         r.t.GetTaskId(),
		Lease:          r.t.GetLease(),
		Steps:          r.buffer,
		Final:          final,
		HandbackReason: string(reason),
	})
	if err != nil {
		r.refused(ctx, err)
		return nil
	}
	r.flushes++
	r.buffer = nil
	r.w.advanceRun.Store(1)
	if resp.GetInstanceStatus() != wigglepb.InstanceStatus_RUNNING {
		if r.handback == "" {
			r.handback = string(traversal.NotRunning)
		}
		return nil
	}
	if !final {
		// The server moved the token on and leased it for the next node's timeout.
		r.l.renewedFor(resp.GetLeaseExpiresAtMs(), r.nextTimeoutMs)
	}
	return resp
}

func (r *localRun) refused(ctx context.Context, err error) {
	if status.Code(err) == codes.Unimplemented && len(r.buffer) == 1 {
		// An older server: report this one step the SERVER way, and stop trying local runs.
		if r.w.advanceRun.Swap(-1) != -1 { // say it once, not per run
			r.w.log.Warn("server does not implement AdvanceRun; running tasks in SERVER mode")
		}
		r.fallBack(ctx)
		return
	}
	r.w.logRefused("AdvanceRun", r.t, err)
	if r.handback == "" {
		r.handback = "refused"
	}
}

// fallBack reports the one buffered step with CompleteTask / FailTask, as in SERVER mode.
func (r *localRun) fallBack(ctx context.Context) {
	out := outcomeOf(r.buffer[0])
	r.buffer = nil
	r.handback = "fallback"
	r.w.reportSingle(ctx, r.t, r.l, out)
}
