package graph

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Parse reads a canonical graph and checks that it is well formed: known kinds, the fields each
// kind needs, and every edge pointing at a node that exists. Version is set from the bytes.
//
// Only structure is checked, not the full graph schema: a worker trusts the server's compiler
// and only needs to know it can walk the graph without meeting a dangling edge.
func Parse(canonical []byte) (*Graph, error) {
	var g Graph
	if err := json.Unmarshal(canonical, &g); err != nil {
		return nil, fmt.Errorf("graph: not a canonical graph: %w", err)
	}
	g.Version = VersionOf(canonical)
	if g.Format != 1 {
		return nil, fmt.Errorf("graph: unsupported format %d", g.Format)
	}
	switch g.Execution {
	case ModeDefault, ModeServer, ModeLocalSync, ModeLocalAsync:
	default:
		return nil, fmt.Errorf("graph: unknown execution mode %q", g.Execution)
	}
	if _, ok := g.Nodes[g.Start]; !ok {
		return nil, fmt.Errorf("graph: start node %q does not exist", g.Start)
	}
	ids := make([]string, 0, len(g.Nodes))
	for id := range g.Nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids) // report the first problem deterministically
	for _, id := range ids {
		n := g.Nodes[id]
		if n == nil {
			return nil, fmt.Errorf("graph: node %q is null", id)
		}
		n.ID = id
		if err := g.check(n); err != nil {
			return nil, fmt.Errorf("graph: node %q: %w", id, err)
		}
	}
	return &g, nil
}

func (g *Graph) check(n *Node) error {
	var edges []string
	switch n.Kind {
	case KindTask, KindPredicate, KindJoin:
		if n.Activity == "" || n.Queue == "" || n.Retry == nil {
			return fmt.Errorf("%s needs activity, queue and retry", n.Kind)
		}
		edges = append(edges, n.Next)
		if n.Alt != nil {
			edges = append(edges, *n.Alt)
		}
		if n.Kind == KindJoin {
			edges = append(edges, n.Fork)
		}
	case KindCondition:
		if n.If == "" {
			return fmt.Errorf("condition needs if")
		}
		edges = append(edges, n.Next)
		if n.Alt != nil {
			edges = append(edges, *n.Alt)
		}
	case KindSet:
		if len(n.Values) == 0 {
			return fmt.Errorf("set needs values")
		}
		edges = append(edges, n.Next)
	case KindFork:
		if len(n.Branches) == 0 {
			return fmt.Errorf("fork without branches")
		}
		for _, first := range n.Branches {
			edges = append(edges, first)
		}
		edges = append(edges, n.Join)
	case KindForEach:
		edges = append(edges, n.Body, n.Join)
	case KindSleep, KindSubflow:
		edges = append(edges, n.Next)
	case KindAwait:
		edges = append(edges, n.Next)
		if n.OnTimeout != nil {
			edges = append(edges, *n.OnTimeout)
		}
		if n.Apply != nil && (n.Apply.Activity == "" || n.Apply.Queue == "") {
			return fmt.Errorf("await apply needs activity and queue")
		}
	case KindEnd:
	default:
		return fmt.Errorf("unknown kind %q", n.Kind)
	}
	for _, to := range edges {
		if _, ok := g.Nodes[to]; !ok {
			return fmt.Errorf("edge to %q, which does not exist", to)
		}
	}
	return nil
}
