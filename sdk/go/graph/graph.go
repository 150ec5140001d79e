// Package graph reads Wiggle's canonical graph (docs/graph.md): the JSON a server returns from
// GetDefinition, byte for byte the form whose SHA-256 is the flow's version.
//
// Edges are named on the node that owns them:
//
//	task       next
//	predicate  next (true), alt (false; nil on a filter: the token ends, filtered)
//	condition  next (true), alt (false; nil on a filter), as a predicate, from a CEL expression
//	set        next (after its CEL values replaced or added context keys), as a task
//	fork       branches (name -> first node of the branch), join
//	join       next (after the combine activity ran)
//	foreach    body (first node of the per-element body), join
//	sleep      next
//	await      next (signal received / apply ran), on_timeout (deadline passed)
//	subflow    next
//	end        (none)
//
// Nothing here does I/O; the worker and the traversal rule share these types.
package graph

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Kind names what a node does.
type Kind string

// The node kinds of the canonical graph.
const (
	KindTask      Kind = "task"
	KindPredicate Kind = "predicate"
	KindCondition Kind = "condition" // a predicate whose value a CEL expression gives
	KindSet       Kind = "set"       // a task whose result CEL expressions give
	KindFork      Kind = "fork"
	KindJoin      Kind = "join"
	KindForEach   Kind = "foreach"
	KindSleep     Kind = "sleep"
	KindAwait     Kind = "await"
	KindSubflow   Kind = "subflow"
	KindEnd       Kind = "end"
)

// ExecutionMode is who drives a run of steps and when it is committed (docs/flow-format.md, "Execution modes").
type ExecutionMode string

// The execution modes a definition may name. DEFAULT defers to the server's setting.
const (
	ModeDefault    ExecutionMode = "DEFAULT"
	ModeServer     ExecutionMode = "SERVER"
	ModeLocalSync  ExecutionMode = "LOCAL_SYNC"
	ModeLocalAsync ExecutionMode = "LOCAL_ASYNC"
)

// Retry says when a failed attempt is tried again. Attempts are numbered from 1.
type Retry struct {
	MaxAttempts int    `json:"max_attempts"`
	Backoff     string `json:"backoff"` // "fixed" | "exponential"
	InitialMs   int64  `json:"initial_ms"`
	MaxMs       int64  `json:"max_ms"`
}

// DelayMs is the pause before the attempt after failedAttempt (1-based).
func (r Retry) DelayMs(failedAttempt int) int64 {
	if r.Backoff == "fixed" {
		return r.InitialMs
	}
	shift := max(0, failedAttempt-1)
	// Compare before shifting: initial << shift may overflow long before it passes max.
	if shift >= 62 || r.InitialMs > r.MaxMs>>shift {
		return r.MaxMs
	}
	return r.InitialMs << shift
}

// Apply is the activity an await runs on {"context": ..., "signal": ...}.
type Apply struct {
	Activity  string `json:"activity"`
	Queue     string `json:"queue"`
	Retry     Retry  `json:"retry"`
	TimeoutMs int64  `json:"timeout_ms"`
}

// Node is one node of the graph. Which fields are meaningful depends on Kind (docs/graph.md);
// the rest are zero. A flat struct rather than one type per kind keeps decoding and the
// traversal rule short, and the canonical form always carries every field of its kind.
type Node struct {
	ID   string `json:"-"`
	Kind Kind   `json:"kind"`

	// Activity fields: task, predicate, join.
	Activity  string `json:"activity,omitempty"`
	Queue     string `json:"queue,omitempty"`
	Retry     *Retry `json:"retry,omitempty"`
	TimeoutMs int64  `json:"timeout_ms,omitempty"`

	Next          string  `json:"next,omitempty"`           // every kind but fork, foreach, end
	Checkpoint    bool    `json:"checkpoint,omitempty"`     // task
	Alt           *string `json:"alt,omitempty"`            // predicate, condition; nil on a filter
	MaxIterations *int    `json:"max_iterations,omitempty"` // predicate, condition: a loop's while

	// Expression fields (docs/expressions.md), kept exactly as written.
	If     string            `json:"if,omitempty"`     // condition: the CEL expression
	Values map[string]string `json:"values,omitempty"` // set: context key -> CEL expression

	Branches       map[string]string `json:"branches,omitempty"`        // fork
	Join           string            `json:"join,omitempty"`            // fork, foreach
	Fork           string            `json:"fork,omitempty"`            // join: its fork / foreach
	Items          string            `json:"items,omitempty"`           // foreach: JSON pointer
	Body           string            `json:"body,omitempty"`            // foreach
	MaxConcurrency *int              `json:"max_concurrency,omitempty"` // foreach

	DurationMs *int64  `json:"duration_ms,omitempty"` // sleep
	Until      *string `json:"until,omitempty"`       // sleep: JSON pointer to an RFC 3339 instant

	Signal    string  `json:"signal,omitempty"`     // await
	OnTimeout *string `json:"on_timeout,omitempty"` // await, set exactly when TimeoutMs is
	Apply     *Apply  `json:"apply,omitempty"`      // await

	Flow    string  `json:"flow,omitempty"`    // subflow
	Version *string `json:"version,omitempty"` // subflow: pinned hash or nil
}

// IsWorkerStep reports whether a worker runs this node: a task, predicate, join (its combine)
// or an await with an apply activity.
func (n *Node) IsWorkerStep() bool {
	switch n.Kind {
	case KindTask, KindPredicate, KindJoin:
		return true
	case KindAwait:
		return n.Apply != nil
	}
	return false
}

// IsExpression reports whether this node is evaluated from CEL rather than run by an activity:
// a condition or a set. In a local run the worker evaluates it; nothing leases it.
func (n *Node) IsExpression() bool {
	return n.Kind == KindCondition || n.Kind == KindSet
}

// StepActivity is the activity a worker runs at this node ("" when none).
func (n *Node) StepActivity() string {
	if n.Kind == KindAwait {
		if n.Apply == nil {
			return ""
		}
		return n.Apply.Activity
	}
	return n.Activity
}

// Graph is a compiled flow: its identity, its options and its nodes by id.
type Graph struct {
	Format    int              `json:"format"`
	Name      string           `json:"name"`
	Version   string           `json:"-"` // "sha256:<64 hex>" of the canonical bytes
	Execution ExecutionMode    `json:"execution"`
	Input     json.RawMessage  `json:"input"` // the flow's input JSON Schema, or null
	Start     string           `json:"start"`
	Nodes     map[string]*Node `json:"nodes"`
}

// VersionOf is the version of canonical graph bytes: "sha256:" + hex of their SHA-256.
func VersionOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}
