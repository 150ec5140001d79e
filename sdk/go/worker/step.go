package worker

import (
	"context"
	"errors"

	"github.com/wiggle-engine/wiggle/sdk/go/graph"
)

// StepInfo is the step a handler is running; stable across retries except for Attempt.
//
// (InstanceID, NodeID, Attempt) make an idempotency key. TaskID is the leased token the worker
// was handed; in a local run every step after the first shares the task id of the run's first
// step.
type StepInfo struct {
	InstanceID    string
	NodeID        string
	Attempt       int
	Flow          string
	Version       string
	Activity      string
	ExecutionMode graph.ExecutionMode
	TaskID        string
}

type stepKey struct{}

// WithStep returns ctx carrying info, as the worker passes it to a handler. Tests of handlers
// use it to run them outside a worker.
func WithStep(ctx context.Context, info StepInfo) context.Context {
	return context.WithValue(ctx, stepKey{}, info)
}

// Step returns the step a handler is running, from the context the worker passed it.
// ok is false outside a handler.
func Step(ctx context.Context) (info StepInfo, ok bool) {
	info, ok = ctx.Value(stepKey{}).(StepInfo)
	return info, ok
}

type nonRetryable struct{ err error }

func (e *nonRetryable) Error() string { return e.err.Error() }
func (e *nonRetryable) Unwrap() error { return e.err }

// NonRetryable marks err so the step fails for good: no retry, the instance fails now with
// err's message. Any other error fails the attempt and leaves the step's retry policy in
// charge. NonRetryable(nil) is nil.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return &nonRetryable{err}
}

// IsNonRetryable reports whether err (or an error it wraps) was marked by NonRetryable.
func IsNonRetryable(err error) bool {
	var nr *nonRetryable
	return errors.As(err, &nr)
}
