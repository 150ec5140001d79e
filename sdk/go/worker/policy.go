package worker

import (
	"github.com/wiggle-engine/wiggle/sdk/go/graph"
	"github.com/wiggle-engine/wiggle/sdk/go/traversal"
)

// The flush half of the local-run loop (docs/worker-protocol.md, "Local runs"): a port of
// wiggle/localrun.py, checked with it against spec/conformance/localrun/.

const (
	// defaultMaxPayload is what a worker assumes when a task does not state the server's limit.
	defaultMaxPayload = 4 << 20
	// requestHeadroom is kept below max_request_bytes for the fields that change between calls.
	requestHeadroom = 1024
	// maxDepth is how deeply a JSON value may nest arrays and objects.
	maxDepth = 128
)

// Handbacks the graph does not decide: the worker's own state between two steps.
const (
	unknownActivity traversal.Handback = "unknown_activity"
	fallbackReason  traversal.Handback = "fallback" // never sent: the step goes as CompleteTask
)

// flushAfter says whether a run that goes on past node, with buffered results in its buffer
// (that step's included), sends them now in a non-final AdvanceRun. A run that stops at this
// step never flushes first: its final AdvanceRun carries the step.
func flushAfter(mode graph.ExecutionMode, node *graph.Node, buffered, batchSize int) bool {
	switch {
	case mode == graph.ModeLocalSync:
		return true
	case node.Kind == graph.KindTask && node.Checkpoint:
		return true
	}
	return buffered >= max(1, batchSize)
}

// defaultMaxRequest is the request limit a server derives from its payload limit.
func defaultMaxRequest(maxPayload int64) int64 {
	return 4*maxPayload + 1<<20
}

// overRequestLimit reports whether a batch of this encoded size must not go as one request.
func overRequestLimit(size int, maxRequest int64) bool {
	return int64(size) > maxRequest-requestHeadroom
}
