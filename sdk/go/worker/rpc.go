package worker

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// rpc is the worker's one I/O seam: every call on the client goes through it, carrying the
// bearer token and a deadline, retried with backoff while the server is unreachable.
type rpc struct {
	client  wigglepb.WiggleClient
	reports *reports // the report RPCs, sent together in ReportBatch calls (batch.go)
	token   string
	timeout time.Duration
	log     *slog.Logger
	outage  *outage
}

// withTimeout is r with another per-call deadline, sharing its outage log.
func (r *rpc) withTimeout(d time.Duration) *rpc {
	c := *r
	c.timeout = d
	return &c
}

// retryable codes mean "not reachable right now": try again after a pause.
func retryable(err error) bool {
	c := status.Code(err)
	return c == codes.Unavailable || c == codes.DeadlineExceeded
}

func (r *rpc) outgoing(ctx context.Context) context.Context {
	if r.token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+r.token)
}

// call runs fn with the token and a deadline; while the server is unreachable it retries with
// backoff for up to retryFor. Every other error, and the last unreachable one, is returned.
func call[Req, Resp any](ctx context.Context, r *rpc, retryFor time.Duration,
	fn func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	return callRetrying(ctx, r, retryFor, retryable, fn, req)
}

// resendable codes leave a report's fate unknown, or say the server failed on it: the report is
// sent again unchanged, with the same seq, which the server never applies twice
// (docs/worker-protocol.md, "Reports").
func resendable(err error) bool {
	c := status.Code(err)
	return retryable(err) || c == codes.Internal || c == codes.Unknown
}

// callReport sends a report, resending it while its fate is unknown for up to retryFor.
func callReport[Req, Resp any](ctx context.Context, r *rpc, retryFor time.Duration,
	fn func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	return callRetrying(ctx, r, retryFor, resendable, fn, req)
}

func callRetrying[Req, Resp any](ctx context.Context, r *rpc, retryFor time.Duration,
	again func(error) bool, fn func(context.Context, Req, ...grpc.CallOption) (Resp, error),
	req Req) (Resp, error) {
	giveUp := time.Now().Add(retryFor)
	b := backoff{}
	for {
		cctx, cancel := context.WithTimeout(r.outgoing(ctx), r.timeout)
		resp, err := fn(cctx, req)
		cancel()
		if err == nil {
			r.outage.succeeded(r.log)
			return resp, nil
		}
		if !again(err) || ctx.Err() != nil {
			return resp, err
		}
		r.outage.failed(r.log, err)
		d := b.next()
		if time.Now().Add(d).After(giveUp) {
			return resp, err
		}
		if !sleep(ctx, d) {
			return resp, err
		}
	}
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// backoff is capped exponential backoff with jitter: 100 ms, 200 ms, ... up to 5 s.
type backoff struct{ cur time.Duration }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = 100 * time.Millisecond
	}
	d := b.cur
	b.cur = min(5*time.Second, b.cur*2)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func (b *backoff) reset() { b.cur = 0 }

// outage logs once when the server becomes unreachable and once when it is back, not once per
// attempt: many goroutines failing during one outage make one line.
type outage struct {
	mu        sync.Mutex
	downSince time.Time
}

func (o *outage) failed(log *slog.Logger, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.downSince.IsZero() {
		o.downSince = time.Now()
		log.Warn("wiggle server unreachable; retrying with backoff", "err", err)
	}
}

func (o *outage) succeeded(log *slog.Logger) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.downSince.IsZero() {
		log.Warn("wiggle server reachable again", "after", time.Since(o.downSince).Round(time.Millisecond))
		o.downSince = time.Time{}
	}
}
