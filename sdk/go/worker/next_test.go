package worker

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// lateAnswer is the fake server with the answer to the first lease's CompleteTask delayed past a
// heartbeat: the server applied the report, which ended the lease, so that heartbeat is refused
// (FAILED_PRECONDITION), and the answer carrying the next task arrives after it. Like a gRPC
// client, a call whose context ends before its answer arrives fails with that context's error.
type lateAnswer struct {
	*fakeServer
	ended   atomic.Bool
	once    sync.Once
	refused chan struct{} // closed at the first heartbeat refused on the ended lease
}

func (s *lateAnswer) Heartbeat(ctx context.Context, in *wigglepb.HeartbeatRequest, opts ...grpc.CallOption) (*wigglepb.HeartbeatResponse, error) {
	if in.GetLease() == "l1" && s.ended.Load() {
		s.once.Do(func() { close(s.refused) })
		return nil, status.Error(codes.FailedPrecondition, "the lease has ended")
	}
	return s.fakeServer.Heartbeat(ctx, in, opts...)
}

func (s *lateAnswer) CompleteTask(ctx context.Context, in *wigglepb.CompleteTaskRequest, opts ...grpc.CallOption) (*wigglepb.TaskReportResponse, error) {
	resp, err := s.fakeServer.CompleteTask(ctx, in, opts...)
	if err != nil || in.GetLease() != "l1" {
		return resp, err
	}
	return resp, s.late(ctx)
}

func (s *lateAnswer) ReportBatch(ctx context.Context, in *wigglepb.ReportBatchRequest, opts ...grpc.CallOption) (*wigglepb.ReportBatchResponse, error) {
	resp, err := s.fakeServer.ReportBatch(ctx, in, opts...)
	if err != nil || len(in.GetReports()) != 1 || in.GetReports()[0].GetComplete().GetLease() != "l1" {
		return resp, err
	}
	return resp, s.late(ctx)
}

// late ends the lease, waits for the heartbeat that finds it ended, then gives the caller room
// to drop the call (nil: the answer arrived).
func (s *lateAnswer) late(ctx context.Context) error {
	s.ended.Store(true)
	select {
	case <-s.refused:
	case <-time.After(10 * time.Second):
		return status.Error(codes.Internal, "no heartbeat came while the answer was held")
	}
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-time.After(200 * time.Millisecond):
		return nil
	}
}

// A heartbeat refused because the step's own CompleteTask ended the lease (it was applied, its
// answer is still on the way) must not cost the next task that answer hands over: it is leased
// to this worker, and dropping it leaves it unrun until its lease expires (seen once in the
// corpus: options/heartbeat with the Go worker). Both with ReportBatch and without.
func TestARefusedHeartbeatDoesNotDropTheNextTaskOfAnAppliedReport(t *testing.T) {
	for _, batched := range []bool{false, true} {
		f := newFake()
		f.noReportBatch = !batched
		s := &lateAnswer{fakeServer: f, refused: make(chan struct{})}
		w := New(s, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).(*worker)
		w.Register("a", appendNode)
		w.Register("b", appendNode)
		next := task("v1", "b", wigglepb.ExecutionMode_SERVER)
		next.Lease = "l2"
		f.nextTask = next
		first := task("v1", "a", wigglepb.ExecutionMode_SERVER)
		first.TimeoutMs = 150 // a heartbeat falls due while the answer is held
		first.LeaseExpiresAtMs = time.Now().Add(150 * time.Millisecond).UnixMilli()
		w.runTask(first)
		select {
		case <-s.refused:
		default:
			t.Fatalf("batched %v: no heartbeat was refused; the test did not test the race", batched)
		}
		if len(f.completes) != 2 || f.completes[1].GetLease() != "l2" {
			t.Errorf("batched %v: %d completes; the next task handed over was never run", batched, len(f.completes))
		}
	}
}
