// Package traversal is the handback rule: after a worker step, where does the token go, and may
// the worker follow it? It is a line-for-line port of wiggle/traversal.py and must agree with
// it exactly; spec/conformance/traversal/ holds the vectors both pass.
//
// After a task, combine or apply the token moves to next; after a predicate to next (true) or
// alt (false); a set moves like a task and a condition like a predicate. The worker keeps going
// only while that node is a task or predicate on a queue it serves, or a condition or set (which
// it evaluates itself), and enough of its lease is left; anything else is a handback with a
// reason.
package traversal

import (
	"fmt"
	"slices"

	"github.com/wiggle-engine/wiggle/sdk/go/graph"
)

// Handback is why a worker stops chaining and gives the token back to the server. The values
// are the wire's handback_reason strings.
type Handback string

// The handback reasons, as in wiggle/traversal.py.
const (
	None        Handback = ""            // keep going locally
	Sleep       Handback = "sleep"       // next node is a timer
	Fork        Handback = "fork"        // next node fans out to parallel branches
	Join        Handback = "join"        // next node is a barrier across siblings
	ForEach     Handback = "foreach"     // next node fans out over a collection
	Await       Handback = "await"       // next node waits for a signal
	Subflow     Handback = "subflow"     // next node starts a child instance
	OtherQueue  Handback = "other_queue" // next step runs on a queue this worker does not serve
	End         Handback = "end"         // the token reached the end of the flow
	Filtered    Handback = "filtered"    // a filter was false: the token ends
	LoopLimit   Handback = "loop_limit"  // a loop's while was true once too often
	StepFailed  Handback = "step_failed" // the step raised: the server applies the retry policy
	LeaseBudget Handback = "lease_budget"
	NotRunning  Handback = "not_running" // the server says the instance is no longer RUNNING
	Shutdown    Handback = "shutdown"    // the worker is draining before it exits
)

var boundaryKinds = map[graph.Kind]Handback{
	graph.KindSleep:   Sleep,
	graph.KindFork:    Fork,
	graph.KindJoin:    Join,
	graph.KindForEach: ForEach,
	graph.KindAwait:   Await,
	graph.KindSubflow: Subflow,
	graph.KindEnd:     End,
}

// Move is where a completed step sends its token. Next is "" when the token does not continue
// (Handback is Filtered or LoopLimit). LoopCounts maps each active loop's while predicate to the
// times it has been true; it travels with the token and is never shared with the caller's map.
type Move struct {
	Next       string
	LoopCounts map[string]int
	Handback   Handback
}

// Successor is the node a completed step at nodeID leads to (a handback only for Filtered and
// LoopLimit). predicate is the predicate's (or condition's) value, nil for other steps. It fails when nodeID is
// not a step a worker runs or a predicate's value is missing: a caller bug, or a path the
// graph does not have.
func Successor(g *graph.Graph, nodeID string, predicate *bool, loopCounts map[string]int) (Move, error) {
	counts := make(map[string]int, len(loopCounts))
	for k, v := range loopCounts {
		counts[k] = v
	}
	node, ok := g.Nodes[nodeID]
	if !ok {
		return Move{}, fmt.Errorf("node %q is not a step a worker runs", nodeID)
	}
	switch node.Kind {
	case graph.KindTask, graph.KindSet, graph.KindJoin:
		return Move{Next: node.Next, LoopCounts: counts}, nil
	case graph.KindAwait:
		if node.Apply == nil {
			return Move{}, fmt.Errorf("await node %q has no apply step to complete", nodeID)
		}
		return Move{Next: node.Next, LoopCounts: counts}, nil
	case graph.KindPredicate, graph.KindCondition:
	default:
		return Move{}, fmt.Errorf("node %q is not a step a worker runs", nodeID)
	}
	if predicate == nil {
		return Move{}, fmt.Errorf("predicate %q needs a boolean result", nodeID)
	}
	if *predicate {
		if node.MaxIterations != nil {
			// The body already ran once per true result plus the first pass; one more true
			// result would start iteration max_iterations + 1.
			timesTrue := counts[nodeID] + 1
			if timesTrue >= *node.MaxIterations {
				return Move{LoopCounts: counts, Handback: LoopLimit}, nil
			}
			counts[nodeID] = timesTrue
		}
		return Move{Next: node.Next, LoopCounts: counts}, nil
	}
	if node.MaxIterations != nil {
		delete(counts, nodeID) // the loop exits: a later entry starts counting afresh
	}
	if node.Alt == nil {
		return Move{LoopCounts: counts, Handback: Filtered}, nil
	}
	return Move{Next: *node.Alt, LoopCounts: counts}, nil
}

// Classify is None when a worker serving queues may run next itself, else why not.
func Classify(g *graph.Graph, next string, queues []string) Handback {
	node := g.Nodes[next]
	if node == nil {
		return End // unreachable on a parsed graph: every edge points at a node
	}
	if h, ok := boundaryKinds[node.Kind]; ok {
		return h
	}
	if node.IsExpression() {
		return None // evaluated where the token is: no queue, no lease
	}
	if !slices.Contains(queues, node.Queue) {
		return OtherQueue
	}
	return None
}

// Advance is Successor then Classify: the whole decision after one successful local step.
func Advance(g *graph.Graph, nodeID string, queues []string, predicate *bool, loopCounts map[string]int) (Move, error) {
	m, err := Successor(g, nodeID, predicate, loopCounts)
	if err != nil || m.Next == "" {
		return m, err
	}
	m.Handback = Classify(g, m.Next, queues)
	return m, nil
}

// LeaseBudgetLeft reports whether enough lease remains to start another step locally: at least
// a quarter of the lease length, so the server never reclaims a lease from a worker that is
// still making progress.
func LeaseBudgetLeft(remainingMs, leaseMs int64) bool {
	return remainingMs*4 >= leaseMs
}
