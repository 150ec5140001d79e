package expr

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
)

// SizeBudget is the profile's limit on what one evaluation makes (docs/expressions.md, "The size
// budget"): a string counts its code points, a list its elements, a map its entries. Past it the
// evaluation fails with invalid_argument, and a result copied out past it with not_json.
const SizeBudget = 4_194_304

const overSizeBudget = "the evaluation made more than %d characters, elements and entries"

// overLimit is the cause of the cancellation that ends an evaluation past one of the profile's
// run-time limits (the size and iteration budgets, the time limit), its message the failure's
// detail: a panic cel-go's program recovers and returns, so that no `||` can set it aside.
const overLimit interpreter.CancellationCause = 1000

// spentName is the activation entry holding what the evaluation has spent of its limits; `@`
// cannot start a name an expression writes.
const spentName = "@wiggle_spent"

// spent is what one evaluation has spent of the profile's run-time limits.
type spent struct {
	start time.Time // when Evaluate began
	steps int       // comprehension steps
	total int       // what the evaluation made
}

func (s *spent) count(n int) {
	s.total += n
	if s.total > SizeBudget {
		stop(fmt.Sprintf(overSizeBudget, SizeBudget))
	}
}

// step is one comprehension step, counted before it runs: the 10,001st stops the evaluation.
func (s *spent) step() {
	s.steps++
	if s.steps > IterationBudget {
		stop(fmt.Sprintf(iterationBudgetDetail, IterationBudget))
	}
}

// inTime stops the evaluation once TimeLimit (timeLimit) has passed. time.Since reads the monotonic
// clock alone: tens of nanoseconds, a fraction of the cheapest comprehension step.
func (s *spent) inTime() {
	if time.Since(s.start) > timeLimit {
		stop(timeLimitDetail)
	}
}

func stop(detail string) {
	panic(interpreter.EvalCancelledError{Cause: overLimit, Message: detail})
}

func spentOf(act interpreter.Activation) *spent {
	if v, ok := act.ResolveName(spentName); ok {
		if s, ok := v.(*spent); ok {
			return s
		}
	}
	return &spent{start: time.Now()} // an evaluation outside Evaluate: counted, but against nothing shared
}

func sizeOf(v ref.Val) int {
	switch x := v.(type) {
	case types.String:
		return utf8.RuneCountInString(string(x))
	case traits.Lister:
		return int(x.Size().(types.Int))
	case traits.Mapper:
		return int(x.Size().(types.Int))
	}
	return 0
}

// What the evaluation counts at a node of the checked tree, by its id.
type counting int

const (
	countSize    counting = iota + 1 // a string, list or map: its size
	countStrings                     // a list or map with its strings: its size and theirs
	countStatic                      // a constant literal: its entries, known from the text
	countReplace                     // `replace`, counted before it is made
	countJoin                        // `join`, counted before it is made
	countStep                        // a comprehension's step: the iteration budget, and the clock
	ownSearch                        // `indexOf`, `lastIndexOf`: the SDK's own (search.go), not counted
	ownSplit                         // `split`: the SDK's own (search.go), counted as a maker is
)

type plan struct {
	what    map[int64]counting
	entries map[int64]int // countStatic's figure
}

var makers = map[string]bool{"lowerAscii": true, "upperAscii": true, "substring": true, "trim": true, "split": true}

// planSizes walks the checked (macro-expanded) tree and notes what the budget counts at each
// node: the same rules as the server's rewrite (wiggle/expressions/_sizing.py).
func planSizes(tree *ast.AST) *plan {
	p := &plan{what: map[int64]counting{}, entries: map[int64]int{}}
	macros := map[int64]string{}
	for id, call := range tree.SourceInfo().MacroCalls() {
		if call.Kind() == ast.CallKind {
			macros[id] = call.AsCall().FunctionName()
		}
	}
	p.visit(tree.Expr(), macros, nil, false)
	return p
}

type macro struct{ accu, name string }

func (p *plan) visit(e ast.Expr, macros map[int64]string, in *macro, chainLeft bool) {
	switch e.Kind() {
	case ast.SelectKind:
		p.visit(e.AsSelect().Operand(), macros, in, false)
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		if call.FunctionName() == "_+_" && in != nil && len(args) == 2 && args[0].Kind() == ast.IdentKind &&
			args[0].AsIdent() == in.accu && args[1].Kind() == ast.ListKind {
			// A map's or filter's own step, `accu + [element]`: the macro's result counts.
			for _, made := range args[1].AsList().Elements() {
				p.visit(made, macros, in, false)
			}
			return
		}
		if call.IsMemberFunction() {
			p.visit(call.Target(), macros, in, false)
		}
		for i, a := range args {
			p.visit(a, macros, in, call.FunctionName() == "_+_" && i == 0)
		}
		name := call.FunctionName()
		switch {
		case name == "_+_" && !chainLeft:
			if !chainHasNumber(e) {
				p.what[e.ID()] = countSize
			}
		case call.IsMemberFunction() && name == "replace" && (len(args) == 2 || len(args) == 3):
			p.what[e.ID()] = countReplace
		case call.IsMemberFunction() && name == "join" && len(args) <= 1:
			p.what[e.ID()] = countJoin
		case call.IsMemberFunction() && (name == "indexOf" || name == "lastIndexOf"):
			p.what[e.ID()] = ownSearch
		case call.IsMemberFunction() && name == "split" && (len(args) == 1 || len(args) == 2):
			p.what[e.ID()] = ownSplit
		case call.IsMemberFunction() && makers[name]:
			p.what[e.ID()] = countSize
		}
	case ast.ListKind, ast.MapKind:
		if n, ok := constantEntries(e); ok {
			p.what[e.ID()] = countStatic
			p.entries[e.ID()] = n
			return
		}
		if e.Kind() == ast.ListKind {
			for _, el := range e.AsList().Elements() {
				p.visit(el, macros, in, false)
			}
		} else {
			for _, entry := range e.AsMap().Entries() {
				m := entry.AsMapEntry()
				p.visit(m.Key(), macros, in, false)
				p.visit(m.Value(), macros, in, false)
			}
		}
		p.what[e.ID()] = countStrings
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		name := macros[e.ID()]
		inner := &macro{accu: c.AccuVar(), name: name}
		p.visit(c.IterRange(), macros, in, false)
		p.visit(c.LoopCondition(), macros, inner, false)
		p.visit(c.LoopStep(), macros, inner, false)
		p.visit(c.Result(), macros, inner, false)
		switch name {
		case "map":
			p.what[e.ID()] = countStrings // each string it makes counts too
		case "filter":
			p.what[e.ID()] = countSize
		}
		// cel-go runs the step once per element visited. The size budget counts no step (a map's
		// or filter's `accu + [element]` is not a sum that counts), so this takes no count's place.
		p.what[c.LoopStep().ID()] = countStep
	}
}

func chainHasNumber(e ast.Expr) bool {
	for e.Kind() == ast.CallKind && e.AsCall().FunctionName() == "_+_" && len(e.AsCall().Args()) == 2 {
		if isNumber(e.AsCall().Args()[1]) {
			return true
		}
		e = e.AsCall().Args()[0]
	}
	return isNumber(e)
}

func isNumber(e ast.Expr) bool {
	if e.Kind() != ast.LiteralKind {
		return false
	}
	switch e.AsLiteral().(type) {
	case types.Int, types.Uint, types.Double:
		return true
	}
	return false
}

func constantEntries(e ast.Expr) (int, bool) {
	switch e.Kind() {
	case ast.LiteralKind:
		return 0, true
	case ast.ListKind:
		n := len(e.AsList().Elements())
		for _, el := range e.AsList().Elements() {
			inner, ok := constantEntries(el)
			if !ok {
				return 0, false
			}
			n += inner
		}
		return n, true
	case ast.MapKind:
		n := len(e.AsMap().Entries())
		for _, entry := range e.AsMap().Entries() {
			m := entry.AsMapEntry()
			k, okk := constantEntries(m.Key())
			v, okv := constantEntries(m.Value())
			if !okk || !okv {
				return 0, false
			}
			n += k + v
		}
		return n, true
	}
	return 0, false
}

// decorator wraps the interpretable of each node the plan counts.
func (p *plan) decorator() interpreter.InterpretableDecorator {
	return func(i interpreter.Interpretable) (interpreter.Interpretable, error) {
		what, ok := p.what[i.ID()]
		if !ok {
			return i, nil
		}
		if _, done := i.(*counted); done {
			return i, nil
		}
		if _, attribute := i.(interpreter.InterpretableAttribute); attribute && what != countStep {
			// cel-go plans `{'k': 1}['k']` as an attribute of the same id; it must stay one. A step
			// (a filter's is a `?:`, which cel-go plans as an attribute) is never qualified.
			return i, nil
		}
		return &counted{Interpretable: i, what: what, entries: p.entries[i.ID()]}, nil
	}
}

type counted struct {
	interpreter.Interpretable
	what    counting
	entries int
}

// Eval looks at the clock before every node the plan names, then counts it as the plan says.
func (c *counted) Eval(act interpreter.Activation) ref.Val {
	s := spentOf(act)
	s.inTime()
	switch c.what {
	case countStep:
		s.step()
		return c.Interpretable.Eval(act)
	case countReplace, countJoin, ownSearch:
		if call, ok := c.Interpretable.(interpreter.InterpretableCall); ok {
			if v, handled := c.evalOwn(call, act, s); handled {
				return v
			}
		}
		return c.Interpretable.Eval(act)
	case countStatic:
		s.count(c.entries)
		return c.Interpretable.Eval(act)
	}
	var v ref.Val
	if c.what == ownSplit {
		if call, ok := c.Interpretable.(interpreter.InterpretableCall); ok {
			if own, handled := c.evalOwn(call, act, s); handled {
				v = own
			}
		}
	}
	if v == nil {
		v = c.Interpretable.Eval(act)
	}
	s.count(sizeOf(v))
	if c.what == countStrings {
		s.count(innerStrings(v))
	}
	return v
}

// innerStrings is the code points of the strings a list holds, or a map holds as keys or values.
func innerStrings(v ref.Val) int {
	n := 0
	add := func(x ref.Val) {
		if s, ok := x.(types.String); ok {
			n += utf8.RuneCountInString(string(s))
		}
	}
	switch x := v.(type) {
	case traits.Lister:
		for it := x.Iterator(); it.HasNext() == types.True; {
			add(it.Next())
		}
	case traits.Mapper:
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			add(k)
			add(x.Get(k))
		}
	}
	return n
}

// evalOwn is the SDK's own replace or join, with its result counted before it is made, or
// indexOf, lastIndexOf or split; handled is false when the arguments are not what they take (the
// library's own call then gives its error).
func (c *counted) evalOwn(call interpreter.InterpretableCall, act interpreter.Activation, s *spent) (ref.Val, bool) {
	args := make([]ref.Val, 0, 4)
	for _, a := range call.Args() {
		v := a.Eval(act)
		if types.IsUnknownOrError(v) {
			return v, true
		}
		args = append(args, v)
	}
	switch c.what {
	case countReplace:
		return replaceCounted(args, s)
	case countJoin:
		return joinCounted(args, s)
	case ownSplit:
		return split(args)
	}
	return search(call.Function(), args)
}

func replaceCounted(args []ref.Val, s *spent) (ref.Val, bool) {
	text, ok1 := args[0].(types.String)
	old, ok2 := args[1].(types.String)
	repl, ok3 := args[2].(types.String)
	limit := -1
	if len(args) == 4 {
		n, ok := args[3].(types.Int)
		if !ok {
			return nil, false
		}
		if n >= 0 {
			limit = int(n)
		}
	}
	if !ok1 || !ok2 || !ok3 {
		return nil, false
	}
	found := strings.Count(string(text), string(old)) // an empty old: code points + 1
	if limit >= 0 && limit < found {
		found = limit
	}
	rc, oc := utf8.RuneCountInString(string(repl)), utf8.RuneCountInString(string(old))
	s.count(utf8.RuneCountInString(string(text)) + found*(rc-oc))
	return types.String(strings.Replace(string(text), string(old), string(repl), limit)), true
}

func joinCounted(args []ref.Val, s *spent) (ref.Val, bool) {
	list, ok := args[0].(traits.Lister)
	if !ok {
		return nil, false
	}
	sep := ""
	if len(args) == 2 {
		x, ok := args[1].(types.String)
		if !ok {
			return nil, false
		}
		sep = string(x)
	}
	n := int(list.Size().(types.Int))
	items := make([]string, 0, n)
	total := 0
	for it := list.Iterator(); it.HasNext() == types.True; {
		item, ok := it.Next().(types.String)
		if !ok {
			return types.NewErr("no such overload: join: the list holds a non-string"), true
		}
		items = append(items, string(item))
		total += utf8.RuneCountInString(string(item))
	}
	if n > 1 {
		total += (n - 1) * utf8.RuneCountInString(sep)
	}
	s.count(total)
	return types.String(strings.Join(items, sep)), true
}

// resultWithin counts a result deeply, as it is copied out, and says whether it stays within
// the budget: a list of many references to one large value is small for cel-go and huge as JSON.
func resultWithin(v ref.Val, left *int) bool {
	*left -= sizeOf(v)
	if *left < 0 {
		return false
	}
	switch x := v.(type) {
	case traits.Lister:
		for it := x.Iterator(); it.HasNext() == types.True; {
			if !resultWithin(it.Next(), left) {
				return false
			}
		}
	case traits.Mapper:
		for it := x.Iterator(); it.HasNext() == types.True; {
			if !resultWithin(x.Get(it.Next()), left) { // its entries counted; keys are small
				return false
			}
		}
	}
	return true
}
