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

// lease is one leased task: its fencing token, when it runs out, the step running under it and
// the reports applied under it. A heartbeat renews it at about a third of its length, so one
// lost heartbeat never costs the lease; a non-final AdvanceRun renews it too. Once the server
// says the instance is no longer RUNNING, or the lease is not ours any more, the lease is lost:
// the step's context is cancelled and the run is abandoned.
//
// Times: the server states expiries on its own clock together with that clock's reading
// (server_now_ms); what is left is anchored at this process's monotonic clock when the answer
// arrived (docs/worker-protocol.md, "Clocks"), so no synced clocks are needed.
type lease struct {
	taskID string
	token  string
	cancel context.CancelFunc // cancels the context handlers of this task run under
	warned bool               // a failed heartbeat was logged; only keepAlive's goroutine uses it

	mu        sync.Mutex
	length    time.Duration // the timeout the lease was last renewed for
	deadline  time.Time     // carries a monotonic reading: immune to wall-clock jumps
	renewedAt time.Time
	lostWhy   string
	node      string        // the step running now: heartbeats name it (node_id)
	nodeLen   time.Duration // its timeout: what a heartbeat naming it renews the lease for
	seq       int64         // reports the server applied under this lease
	// renewals wakes keepAlive at each renewal: a renewal for a shorter step (a non-final
	// AdvanceRun before it) brings the next heartbeat forward, not only later.
	renewals chan struct{}
}

func newLease(t *wigglepb.Task, cancel context.CancelFunc) *lease {
	length := ms(t.GetTimeoutMs())
	if length <= 0 {
		length = 60 * time.Second
	}
	l := &lease{taskID: t.GetTaskId(), token: t.GetLease(), length: length, cancel: cancel,
		node: t.GetNodeId(), nodeLen: length}
	l.renewed(t.GetLeaseExpiresAtMs(), t.GetServerNowMs(), 0)
	l.renewals = make(chan struct{}, 1) // after the lease's first reading: no wake-up for it
	return l
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// renewed records a renewal: the expiry and the server's clock when it answered, both in
// milliseconds (serverNowMs 0: an older server; this host's wall clock stands in, and a
// nonsense expiry falls back to one lease length). length is the lease's new length (0: as it
// was).
func (l *lease) renewed(expiresAtMs, serverNowMs int64, length time.Duration) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if length > 0 {
		l.length = length
	}
	var left time.Duration
	switch {
	case expiresAtMs <= 0:
		left = l.length
	case serverNowMs > 0:
		left = ms(expiresAtMs - serverNowMs)
	default:
		left = ms(expiresAtMs - now.UnixMilli())
		if left <= 0 || left > 10*l.length {
			left = l.length
		}
	}
	l.deadline = now.Add(left)
	l.renewedAt = now
	select {
	case l.renewals <- struct{}{}:
	default: // one wake-up pending is enough: keepAlive reads the lease afresh
	}
}

// at records the step now running and its timeout, which the next heartbeat names.
func (l *lease) at(node string, timeout time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.node, l.nodeLen = node, timeout
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
	if l.lostWhy == "" && time.Now().After(l.deadline) {
		return "the lease expired"
	}
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

// nextSeq is the seq of the next report: one past the last the server applied.
func (l *lease) nextSeq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq + 1
}

func (l *lease) applied(seq int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq = max(l.seq, seq)
}

// keepAlive heartbeats l whenever it falls due, until ctx ends (the task's run finished) or
// the lease is lost. A renewal (by AdvanceRun or a heartbeat) wakes it to compute the next beat
// again: a lease renewed for a shorter step than before is due sooner than it was.
func (w *worker) keepAlive(ctx context.Context, l *lease) {
	for {
		due := l.nextBeat()
		if wait := time.Until(due); wait > 0 {
			timer := w.newTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-l.renewals:
				timer.Stop()
				continue
			case <-timer.C:
			}
		}
		if ctx.Err() != nil || l.lost() != "" {
			return
		}
		w.beat(ctx, l)
	}
}

// beat heartbeats l once, naming the step running now. An unreachable server is not fatal: the
// next beat tries again sooner, and a local run's lease budget check notices if the deadline
// comes close.
func (w *worker) beat(ctx context.Context, l *lease) {
	l.mu.Lock()
	length, node, nodeLen := l.length, l.node, l.nodeLen
	l.mu.Unlock()
	r := w.rpc.withTimeout(max(time.Second, length/3))
	resp, err := call(ctx, r, 0, w.rpc.client.Heartbeat,
		&wigglepb.HeartbeatRequest{TaskId: l.taskID, Lease: l.token, NodeId: node})
	if err != nil {
		switch status.Code(err) {
		case codes.FailedPrecondition, codes.NotFound, codes.Aborted:
			l.lose(fmt.Sprintf("heartbeat refused: %v", status.Convert(err).Message()))
		default:
			if !retryable(err) && !l.warned {
				l.warned = true // once per lease: a broken server would flood the log
				w.log.Warn("heartbeat failed", "task", l.taskID, "err", err)
			}
			// Retry sooner than a full third of the lease: pretend a renewal a while ago.
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
	l.renewed(resp.GetLeaseExpiresAtMs(), resp.GetServerNowMs(), nodeLen)
}
