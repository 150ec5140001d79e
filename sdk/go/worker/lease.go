package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// lease is one leased task: its fencing token and when it runs out. A heartbeat renews it at
// about a third of its length, so one lost heartbeat never costs the lease; AdvanceRun renews
// it too. Once the server says the instance is no longer RUNNING, or the lease is not ours any
// more, the lease is lost: the step's context is cancelled and the run is abandoned.
type lease struct {
	taskID string
	token  string
	cancel context.CancelFunc // cancels the context handlers of this task run under
	warned bool               // a failed heartbeat was logged; only keepAlive's goroutine uses it

	mu        sync.Mutex
	length    time.Duration // the lease length: the timeout of the node the token is at
	deadline  time.Time     // carries a monotonic reading: immune to wall-clock jumps
	renewedAt time.Time
	lostWhy   string
}

func newLease(t *wigglepb.Task, cancel context.CancelFunc) *lease {
	length := time.Duration(t.GetTimeoutMs()) * time.Millisecond
	if length <= 0 {
		length = 60 * time.Second
	}
	l := &lease{taskID: t.GetTaskId(), token: t.GetLease(), length: length, cancel: cancel}
	l.renewed(t.GetLeaseExpiresAtMs())
	return l
}

// renewed records a renewal the server reported as an absolute expiry on the database's clock.
// What is left is measured against our wall clock once and then anchored on the monotonic
// clock; a nonsense expiry (clock skew) falls back to one lease length.
func (l *lease) renewed(expiresAtMs int64) {
	l.renewedFor(expiresAtMs, 0)
}

// renewedFor is renewed after the token moved to a node whose timeout (lengthMs, 0: unchanged)
// the server now leases it for: AdvanceRun renews for the next node's timeout.
func (l *lease) renewedFor(expiresAtMs, lengthMs int64) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if lengthMs > 0 {
		l.length = time.Duration(lengthMs) * time.Millisecond
	}
	left := l.length
	if expiresAtMs > 0 {
		left = time.Duration(expiresAtMs-now.UnixMilli()) * time.Millisecond
	}
	if left <= 0 || left > 10*l.length {
		left = l.length
	}
	l.deadline = now.Add(left)
	l.renewedAt = now
}

func (l *lease) lose(why string) {
	l.mu.Lock()
	first := l.lostWhy == ""
	if first {
		l.lostWhy = why
	}
	l.mu.Unlock()
	if first && l.cancel != nil {
		l.cancel()
	}
}

// lost is the reason the lease was lost, "" while it is held.
func (l *lease) lost() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostWhy
}

func (l *lease) remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Until(l.deadline)
}

// nextBeat is when a heartbeat falls due: a third of the lease after the last renewal.
func (l *lease) nextBeat() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewedAt.Add(l.length / 3)
}

func (l *lease) lengthNow() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.length
}

// keepAlive heartbeats l whenever it falls due, until ctx ends (the task's run finished) or
// the lease is lost. A renewal by AdvanceRun moves the next beat later on its own.
func (w *worker) keepAlive(ctx context.Context, l *lease) {
	for {
		due := l.nextBeat()
		if wait := time.Until(due); wait > 0 {
			if !sleep(ctx, wait) {
				return
			}
			if l.nextBeat().After(due) { // renewed meanwhile
				continue
			}
		}
		if ctx.Err() != nil || l.lost() != "" {
			return
		}
		w.beat(ctx, l)
	}
}

// beat heartbeats l once. An unreachable server is not fatal: the next beat tries again and a
// local run's lease budget check notices if the deadline comes close.
func (w *worker) beat(ctx context.Context, l *lease) {
	length := l.lengthNow()
	r := w.rpc.withTimeout(max(time.Second, length/3))
	resp, err := call(ctx, r, 0, w.rpc.client.Heartbeat, &wigglepb.HeartbeatRequest{TaskId: l.taskID, Lease: l.token})
	if err != nil {
		switch status.Code(err) {
		case codes.FailedPrecondition, codes.NotFound, codes.Aborted:
			l.lose(fmt.Sprintf("heartbeat refused: %v", status.Convert(err).Message()))
		default:
			if !retryable(err) && !l.warned {
				l.warned = true // once per lease: a broken server would flood the log
				w.log.Warn("heartbeat failed", "task", l.taskID, "err", err)
			}
			// Retry sooner than a full third of the lease: pretend a renewal a second ago.
			l.mu.Lock()
			l.renewedAt = time.Now().Add(-length/3 + min(time.Second, length/6))
			l.mu.Unlock()
		}
		return
	}
	if resp.GetInstanceStatus() != wigglepb.InstanceStatus_RUNNING {
		l.lose("instance is " + resp.GetInstanceStatus().String())
		return
	}
	l.renewed(resp.GetLeaseExpiresAtMs())
}
