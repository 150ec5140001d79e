package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/wiggle-engine/wiggle/sdk/go/graph"
	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// negativeTTL is how long a failed fetch is remembered before the worker asks again, so a
// missing definition does not cost a GetDefinition per task.
const negativeTTL = 10 * time.Second

// definitions caches the pinned graphs local runs need, fetched once per version. A worker that
// cannot get (or read) the pinned version runs the task as a SERVER step: slower, never wrong.
type definitions struct {
	rpc    *rpc
	log    *slog.Logger
	mu     sync.Mutex
	graphs map[string]*graph.Graph
	failed map[string]time.Time
}

func newDefinitions(r *rpc, log *slog.Logger) *definitions {
	return &definitions{rpc: r, log: log, graphs: map[string]*graph.Graph{}, failed: map[string]time.Time{}}
}

// get is the graph of flow at version, or nil when it cannot be had right now.
func (d *definitions) get(ctx context.Context, flow, version string) *graph.Graph {
	d.mu.Lock()
	if g := d.graphs[version]; g != nil {
		d.mu.Unlock()
		return g
	}
	if at, ok := d.failed[version]; ok && time.Since(at) < negativeTTL {
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	// Fetched outside the lock: two goroutines may fetch one version at once, which is
	// harmless (same bytes) and cheaper than serialising every first fetch.
	g := d.fetch(ctx, flow, version)
	d.mu.Lock()
	defer d.mu.Unlock()
	if g == nil {
		d.failed[version] = time.Now()
	} else {
		d.graphs[version] = g
		delete(d.failed, version)
	}
	return g
}

func (d *definitions) fetch(ctx context.Context, flow, version string) *graph.Graph {
	def, err := call(ctx, d.rpc, 5*time.Second, d.rpc.client.GetDefinition,
		&wigglepb.GetDefinitionRequest{Name: flow, Version: version})
	if err != nil {
		d.log.Warn("cannot fetch definition; running its tasks in SERVER mode", "flow", flow, "version", version, "err", err)
		return nil
	}
	g, err := graph.Parse(def.GetGraph())
	if err != nil {
		d.log.Warn("cannot read definition; running its tasks in SERVER mode", "flow", flow, "version", version, "err", err)
		return nil
	}
	if g.Version != version {
		// The server handed us other bytes than the pinned version: never chain on them.
		d.log.Warn("definition hashes to another version; running its tasks in SERVER mode",
			"flow", flow, "version", version, "hash", g.Version)
		return nil
	}
	return g
}
