package worker

import (
	"context"
	"encoding/json"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wiggle-engine/wiggle/sdk/go/graph"
	"github.com/wiggle-engine/wiggle/sdk/go/traversal"
	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// localRun is one local run, from a leased task to its handback (docs/worker-protocol.md,
// "Local runs"; vectors in spec/conformance/localrun/).
//
// It starts at the leased node and keeps executing nodes itself while the handback rule says
// the next node is a step this worker may run, reporting through AdvanceRun: after every step
// in LOCAL_SYNC; in LOCAL_ASYNC at handback, right after a checkpoint step, whenever
// LocalBatchSize worker steps are buffered, and before a result would push the request over the
// server's limit. Between steps it checks whether the lease was lost (abandon: the server would
// refuse the results anyway), whether the worker is draining (hand back with reason shutdown),
// whether enough lease is left, and whether it has the next step's activity.
//
// A condition or set node the token reaches after a worker step is evaluated on the spot
// (expressions.go) and its result buffered with that step; the flush and handback decisions
// are taken after the chain of such nodes, at the worker step or boundary it leads to.
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
	// nextTimeout is the timeout of the node a non-final flush moves the token to.
	nextTimeout time.Duration
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
	position, previous := 0, "" // the step's place in the run, the span before it (tracing)
	for {
		node := g.Nodes[nodeID]
		isPredicate := node.Kind == graph.KindPredicate
		h, found := w.reg.get(activity)
		info := stepInfo(t, nodeID, activity, attempt, r.mode)
		var out outcome
		if w.tracer == nil {
			out = runHandler(WithStep(ctx, info), h, found, activity, in, isPredicate)
		} else {
			out, previous = w.tracer.run(ctx, t, stepSpan{
				node: nodeID, activity: activity, mode: string(r.mode), attempt: attempt,
				position: position, loops: loopCounts, previous: previous,
			}, func(ctx context.Context) outcome {
				return runHandler(WithStep(ctx, info), h, found, activity, in, isPredicate)
			})
			position++
		}
		if why := r.l.lost(); why != "" {
			// Lost while the step ran: no report may follow, not even a size flush of what was
			// buffered before it (docs/worker-protocol.md, "The loop").
			w.log.Info("local run ends", "task", t.GetTaskId(), "why", why)
			r.handback = string(traversal.NotRunning)
			return
		}
		if !isPredicate || out.predicate == nil {
			out = checkLimits(out, t.GetMaxPayloadBytes())
		}
		// A failure, or no boolean at a predicate (its value goes as a context, and the server
		// fails the step as it does a SERVER-mode CompleteTask): the run ends here.
		ends := out.failure != nil || (isPredicate && out.predicate == nil)
		result := stepResult(nodeID, out)
		if len(r.buffer) > 0 && r.overLimit(result) {
			r.nextTimeout = stepTimeout(node)
			if resp := r.flush(ctx, false, ""); resp == nil || !resp.GetKeepGoing() {
				return
			}
		}
		r.buffer = append(r.buffer, result)
		if ends {
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
		// The context the next node receives: a predicate leaves it as it was.
		if !isPredicate {
			in = out.context
		}
		// Expression nodes are evaluated here and travel with the worker step before them:
		// never flushed alone, never a reason to hand back (docs/worker-protocol.md,
		// "Expression nodes in a run"). The checks below apply after the chain.
		for move.Handback == traversal.None && g.Nodes[move.Next].IsExpression() {
			x := g.Nodes[move.Next]
			value := evaluateNode(x, in, r.instance(), t.GetMaxPayloadBytes())
			r.buffer = append(r.buffer, stepResult(x.ID, value))
			if value.failure != nil {
				r.finish(ctx, traversal.StepFailed)
				return
			}
			if value.predicate == nil {
				in = value.context
			}
			if move, err = traversal.Advance(g, x.ID, w.opts.Queues, value.predicate, move.LoopCounts); err != nil {
				w.log.Error("traversal refused an expression node", "task", t.GetTaskId(), "node", x.ID, "err", err)
				r.finish(ctx, traversal.StepFailed)
				return
			}
		}
		reason := move.Handback
		if reason == traversal.None {
			var abandon bool
			if reason, abandon = r.betweenSteps(ctx, g.Nodes[move.Next]); abandon {
				return
			}
		}
		if reason != traversal.None {
			r.finish(ctx, reason)
			return
		}
		if flushAfter(r.mode, node, r.workerSteps(), w.opts.LocalBatchSize) {
			r.nextTimeout = stepTimeout(g.Nodes[move.Next])
			if resp := r.flush(ctx, false, ""); resp == nil || !resp.GetKeepGoing() {
				return
			}
		}
		nodeID = move.Next
		activity = g.Nodes[nodeID].StepActivity()
		attempt = 1
		loopCounts = move.LoopCounts
	}
}

// instance is the expressions' instance variable: {"id": ..., "flow": ...}.
func (r *localRun) instance() map[string]any {
	return map[string]any{"id": r.t.GetInstanceId(), "flow": r.t.GetFlow()}
}

// workerSteps is how many buffered results are worker steps: the batch size does not count
// expression results.
func (r *localRun) workerSteps() int {
	n := 0
	for _, s := range r.buffer {
		if node := r.g.Nodes[s.GetNodeId()]; node == nil || !node.IsExpression() {
			n++
		}
	}
	return n
}

func stepTimeout(n *graph.Node) time.Duration {
	if n.Kind == graph.KindAwait && n.Apply != nil {
		return ms(n.Apply.TimeoutMs)
	}
	return ms(n.TimeoutMs)
}

// betweenSteps is why not to start the next step: a fallback another run discovered, a drain,
// a spent lease budget, an activity this worker lacks; abandon when the lease is lost or the
// worker gave up draining (behave like a crash). Before the budget check, a next step with a
// longer timeout than the lease's length is announced by a heartbeat naming it, so the server
// renews the lease by that timeout (docs/worker-protocol.md, "Lease length in a local run").
func (r *localRun) betweenSteps(ctx context.Context, next *graph.Node) (traversal.Handback, bool) {
	if why := r.l.lost(); why != "" {
		r.w.log.Info("local run abandoned", "task", r.t.GetTaskId(), "why", why)
		r.handback = string(traversal.NotRunning)
		return traversal.None, true
	}
	if ctx.Err() != nil {
		r.handback = "aborted"
		return traversal.None, true
	}
	if r.w.advanceRun.Load() < 0 && r.flushes == 0 {
		return fallbackReason, false
	}
	if r.w.isDraining() {
		return traversal.Shutdown, false
	}
	timeout := stepTimeout(next)
	r.l.at(next.ID, timeout)
	if timeout > r.l.lengthNow() {
		r.w.beat(ctx, r.l)
		if why := r.l.lost(); why != "" {
			r.handback = string(traversal.NotRunning)
			return traversal.None, true
		}
	}
	if !traversal.LeaseBudgetLeft(r.l.remaining().Milliseconds(), r.l.lengthNow().Milliseconds()) {
		return traversal.LeaseBudget, false
	}
	if _, ok := r.w.reg.get(next.StepActivity()); !ok {
		return unknownActivity, false
	}
	return traversal.None, false
}

// overLimit reports whether adding result to the buffer would push the AdvanceRun over the
// server's request limit (LOCAL_ASYNC: a LOCAL_SYNC buffer is empty here).
func (r *localRun) overLimit(result *wigglepb.StepResult) bool {
	limit := r.t.GetMaxRequestBytes()
	if limit <= 0 {
		payload := r.t.GetMaxPayloadBytes()
		if payload <= 0 {
			payload = defaultMaxPayload
		}
		limit = defaultMaxRequest(payload)
	}
	req := &wigglepb.AdvanceRunRequest{TaskId: r.t.GetTaskId(), Lease: r.t.GetLease(),
		Steps: append(append([]*wigglepb.StepResult(nil), r.buffer...), result)}
	return overRequestLimit(proto.Size(req), limit)
}

func (r *localRun) finish(ctx context.Context, reason traversal.Handback) {
	r.handback = string(reason)
	r.flush(ctx, true, reason)
}

// flush sends the buffer; nil when the run must stop (refused, not RUNNING, fallen back).
func (r *localRun) flush(ctx context.Context, final bool, reason traversal.Handback) *wigglepb.AdvanceRunResponse {
	if r.w.advanceRun.Load() < 0 && r.flushes == 0 {
		r.fallBack() // another run found out the server has no AdvanceRun
		return nil
	}
	seq := r.l.nextSeq()
	resp, err := callReport(ctx, r.w.rpc, retryWindow(r.l), r.w.rpc.reports.AdvanceRun, &wigglepb.AdvanceRunRequest{
		TaskId:         r.t.GetTaskId(),
		Lease:          r.t.GetLease(),
		Steps:          r.buffer,
		Final:          final,
		HandbackReason: string(reason),
		Seq:            seq,
	})
	if err != nil {
		r.refused(ctx, err)
		return nil
	}
	r.l.applied(seq)
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
		r.l.renewed(resp.GetLeaseExpiresAtMs(), resp.GetServerNowMs(), r.nextTimeout)
	}
	return resp
}

func (r *localRun) refused(ctx context.Context, err error) {
	if status.Code(err) == codes.Unimplemented && r.flushes == 0 {
		// An older server: report the first step the SERVER way (the lease is the task's), and
		// run every later task as a SERVER step. The rest of the buffer is dropped: those steps
		// run again as SERVER tasks, within LOCAL_ASYNC's at-least-once contract.
		if r.w.advanceRun.Swap(-1) != -1 { // say it once, not per run
			r.w.log.Warn("server does not implement AdvanceRun; running tasks in SERVER mode")
		}
		r.fallBack()
		return
	}
	if r.handback == "" {
		r.handback = "refused"
	}
	r.w.refused(ctx, "AdvanceRun", r.t, r.l, err)
}

// fallBack reports the first buffered step with CompleteTask / FailTask, as in SERVER mode.
func (r *localRun) fallBack() {
	out := outcomeOf(r.buffer[0])
	r.buffer = nil
	r.handback = "fallback"
	r.w.reportSingle(r.t, r.l, out, false)
}
