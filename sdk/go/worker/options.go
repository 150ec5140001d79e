package worker

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"
)

// Options configure a Worker. Zero values take the defaults noted on each field.
type Options struct {
	// Queues the worker serves. Default ["default"].
	Queues []string
	// Concurrency is the most tasks (SERVER steps or local runs) in flight at once. Default 16.
	Concurrency int
	// LocalBatchSize is how many LOCAL_ASYNC worker-step results are buffered before a mid-run
	// flush (the results of the condition and set nodes evaluated after them do not count).
	// Default 64.
	LocalBatchSize int
	// WorkerID names the worker as the lease owner. Default "<host>:<pid>:<random>".
	WorkerID string
	// Token is sent as "authorization: Bearer <token>" on every call when set.
	Token string
	// PollWait is how long the server may hold one PollTasks call open. Default 10 s.
	PollWait time.Duration
	// CallTimeout is the deadline of every other call. Default 30 s.
	CallTimeout time.Duration
	// Logger receives the worker's own events. Default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if len(o.Queues) == 0 {
		o.Queues = []string{"default"}
	}
	o.Queues = append([]string(nil), o.Queues...) // the caller may reuse its slice
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.LocalBatchSize <= 0 {
		o.LocalBatchSize = 64
	}
	if o.WorkerID == "" {
		host, _ := os.Hostname()
		o.WorkerID = fmt.Sprintf("%s:%d:%08x", host, os.Getpid(), rand.Uint32())
	}
	if o.PollWait <= 0 {
		o.PollWait = 10 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
