package worker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// maxBatchBytes bounds one ReportBatch request, or the server's own request limit when a task
// said it is smaller (a report over it travels alone).
const maxBatchBytes = 4 << 20

// errUnbatched says the server has no ReportBatch: the caller sends its report alone.
var errUnbatched = errors.New("ReportBatch unimplemented")

// reports sends the reports of concurrent tasks together, in ReportBatch calls
// (docs/worker-protocol.md, "Batched reports"): a report made while no batch is in flight goes
// at once, in a batch of its own; those made while one is in flight go together in the next.
// Batching never delays a lone report; it only groups reports that would each wait for a round
// trip. Each caller gets what its own RPC would have answered: the answer, or an error with the
// status code and message the single call would have failed with, so resends (same seq) and
// error handling do not know batching exists. A server without ReportBatch (UNIMPLEMENTED)
// turns batching off for good: reports go one RPC each again.
//
// Its four methods have the signatures of the client's report RPCs, so callReport takes them
// as it takes those.
type reports struct {
	r        *rpc
	off      atomic.Bool
	maxBytes atomic.Int64
	calls    atomic.Int64 // ReportBatch RPCs sent (for tests)

	mu       sync.Mutex
	queue    []*queued
	inFlight bool
}

type queued struct {
	report *wigglepb.TaskReport
	ctx    context.Context
	done   chan answered // buffered: the sender never blocks on a caller that gave up
}

type answered struct {
	answer *wigglepb.TaskReportAnswer
	err    error
}

func newReports(r *rpc) *reports {
	b := &reports{r: r}
	b.maxBytes.Store(maxBatchBytes)
	return b
}

// noteLimit lowers the batch bound to the server's request limit, as a task carried it.
func (b *reports) noteLimit(maxRequestBytes int64) {
	for {
		cur := b.maxBytes.Load()
		if maxRequestBytes <= 0 || maxRequestBytes >= cur || b.maxBytes.CompareAndSwap(cur, maxRequestBytes) {
			return
		}
	}
}

func (b *reports) CompleteTask(ctx context.Context, in *wigglepb.CompleteTaskRequest, opts ...grpc.CallOption) (*wigglepb.TaskReportResponse, error) {
	a, err := b.submit(ctx, &wigglepb.TaskReport{Report: &wigglepb.TaskReport_Complete{Complete: in}})
	if errors.Is(err, errUnbatched) {
		return b.r.client.CompleteTask(ctx, in, opts...)
	}
	return taskAnswer(a, err)
}

func (b *reports) FailTask(ctx context.Context, in *wigglepb.FailTaskRequest, opts ...grpc.CallOption) (*wigglepb.TaskReportResponse, error) {
	a, err := b.submit(ctx, &wigglepb.TaskReport{Report: &wigglepb.TaskReport_Fail{Fail: in}})
	if errors.Is(err, errUnbatched) {
		return b.r.client.FailTask(ctx, in, opts...)
	}
	return taskAnswer(a, err)
}

func (b *reports) ReleaseTask(ctx context.Context, in *wigglepb.ReleaseTaskRequest, opts ...grpc.CallOption) (*wigglepb.TaskReportResponse, error) {
	a, err := b.submit(ctx, &wigglepb.TaskReport{Report: &wigglepb.TaskReport_Release{Release: in}})
	if errors.Is(err, errUnbatched) {
		return b.r.client.ReleaseTask(ctx, in, opts...)
	}
	return taskAnswer(a, err)
}

func (b *reports) AdvanceRun(ctx context.Context, in *wigglepb.AdvanceRunRequest, opts ...grpc.CallOption) (*wigglepb.AdvanceRunResponse, error) {
	a, err := b.submit(ctx, &wigglepb.TaskReport{Report: &wigglepb.TaskReport_Advance{Advance: in}})
	if errors.Is(err, errUnbatched) {
		return b.r.client.AdvanceRun(ctx, in, opts...)
	}
	if err != nil {
		return nil, err
	}
	adv, ok := a.GetAnswer().(*wigglepb.TaskReportAnswer_Advance)
	if !ok {
		return nil, status.Error(codes.Internal, "ReportBatch answered an AdvanceRun with another kind of answer")
	}
	return adv.Advance, nil
}

func taskAnswer(a *wigglepb.TaskReportAnswer, err error) (*wigglepb.TaskReportResponse, error) {
	if err != nil {
		return nil, err
	}
	t, ok := a.GetAnswer().(*wigglepb.TaskReportAnswer_Task)
	if !ok {
		return nil, status.Error(codes.Internal, "ReportBatch answered a report with another kind of answer")
	}
	return t.Task, nil
}

// submit queues report for the next batch and waits for its answer; errUnbatched when the
// server has no ReportBatch. A refused report comes back as the error its own RPC would be.
func (b *reports) submit(ctx context.Context, report *wigglepb.TaskReport) (*wigglepb.TaskReportAnswer, error) {
	if b.off.Load() {
		return nil, errUnbatched
	}
	q := &queued{report: report, ctx: ctx, done: make(chan answered, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, q)
	if !b.inFlight {
		b.inFlight = true
		go b.send()
	}
	b.mu.Unlock()
	select {
	case got := <-q.done:
		if got.err != nil {
			return nil, got.err
		}
		if e, ok := got.answer.GetAnswer().(*wigglepb.TaskReportAnswer_Error); ok {
			return nil, status.Error(codes.Code(e.Error.GetStatusCode()), e.Error.GetMessage())
		}
		return got.answer, nil
	case <-ctx.Done():
		// The report may still be applied: the caller's resend (same seq) settles it.
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// send sends what is queued, batch after batch, until the queue is empty.
func (b *reports) send() {
	for {
		b.mu.Lock()
		items := b.queue
		b.queue = nil
		if len(items) == 0 {
			b.inFlight = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		for _, chunk := range chunks(items, b.maxBytes.Load()) {
			b.sendChunk(chunk)
		}
	}
}

func (b *reports) sendChunk(items []*queued) {
	if b.off.Load() {
		answerAll(items, nil, errUnbatched)
		return
	}
	req := &wigglepb.ReportBatchRequest{}
	for _, q := range items {
		req.Reports = append(req.Reports, q.report)
	}
	// The call carries the earliest deadline of its callers, and the worker's token.
	ctx, cancel := context.WithTimeout(b.r.outgoing(context.Background()), b.r.timeout)
	defer cancel()
	for _, q := range items {
		if d, ok := q.ctx.Deadline(); ok {
			var c context.CancelFunc
			ctx, c = context.WithDeadline(ctx, d)
			defer c()
		}
	}
	b.calls.Add(1)
	resp, err := b.r.client.ReportBatch(ctx, req)
	switch {
	case status.Code(err) == codes.ResourceExhausted && len(items) > 1:
		// Too big together (the limit was not known yet): never let one report's size spoil
		// the others; each goes alone and gets its own answer.
		for _, q := range items {
			b.sendChunk([]*queued{q})
		}
	case status.Code(err) == codes.Unimplemented:
		if !b.off.Swap(true) {
			b.r.log.Info("server does not implement ReportBatch; reporting one RPC each")
		}
		answerAll(items, nil, errUnbatched)
	case err != nil:
		answerAll(items, nil, err) // the whole call failed: each caller resends as usual
	case len(resp.GetAnswers()) != len(items):
		answerAll(items, nil, status.Errorf(codes.Internal,
			"ReportBatch answered %d reports for %d sent", len(resp.GetAnswers()), len(items)))
	default:
		for i, q := range items {
			q.done <- answered{answer: resp.GetAnswers()[i]}
		}
	}
}

func answerAll(items []*queued, a *wigglepb.TaskReportAnswer, err error) {
	for _, q := range items {
		q.done <- answered{answer: a, err: err}
	}
}

// chunks splits items so no ReportBatch request exceeds maxBytes (a bigger report alone).
func chunks(items []*queued, maxBytes int64) [][]*queued {
	var out [][]*queued
	start, size := 0, int64(0)
	for i, q := range items {
		// A TaskReport inside the request: a tag and a length around it.
		weight := int64(proto.Size(q.report)) + 16
		if i > start && size+weight > maxBytes {
			out = append(out, items[start:i])
			start, size = i, 0
		}
		size += weight
	}
	return append(out, items[start:])
}
