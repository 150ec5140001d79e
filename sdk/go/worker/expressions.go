package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/wiggle-engine/wiggle/sdk/go/expr"
	"github.com/wiggle-engine/wiggle/sdk/go/graph"
)

// expressionErrorType is the error_type of an expression node's failure, in every language.
const expressionErrorType = "ExpressionError"

// expressionCacheSize is how many compiled expressions the cache keeps before it starts afresh.
const expressionCacheSize = 4096

// compiledExpressions maps a CEL source to its *expr.Expression, or to the error compiling it
// gave: each source is compiled once per process, whichever graph or run meets it.
var compiledExpressions = struct {
	sync.Mutex
	m map[string]compiledExpression
}{m: map[string]compiledExpression{}}

type compiledExpression struct {
	x   *expr.Expression
	err error
}

// compiled is the checked expression of source; a stored graph whose expression does not
// compile (written by hand, or by an older profile) fails its node with invalid_argument.
func compiled(source string) (*expr.Expression, *expr.EvaluationError) {
	c := &compiledExpressions
	c.Lock()
	found, ok := c.m[source]
	c.Unlock()
	if !ok {
		x, err := expr.Compile(source) // outside the lock: compiling takes a while
		found = compiledExpression{x, err}
		c.Lock()
		if len(c.m) >= expressionCacheSize {
			clear(c.m)
		}
		if raced, ok := c.m[source]; ok {
			found = raced
		} else {
			c.m[source] = found
		}
		c.Unlock()
	}
	if found.err != nil {
		return nil, &expr.EvaluationError{Source: source, Kind: expr.InvalidArgument,
			Detail: "does not compile: " + found.err.Error()}
	}
	return found.x, nil
}

// cachedExpressions is how many compiled expressions the cache holds (for tests).
func cachedExpressions() int {
	compiledExpressions.Lock()
	defer compiledExpressions.Unlock()
	return len(compiledExpressions.m)
}

// evaluateNode is the outcome of an expression node (a condition or a set) for the context ctx
// of the instance {"id": ..., "flow": ...} (docs/worker-protocol.md, "Expression nodes in a
// run"; the same rule as wiggle/expressions/_nodes.py): a condition's predicate, a set's new
// context (held to the server's payload limit like any step result), or a non-retryable
// ExpressionError failure whose message begins with the error kind.
func evaluateNode(n *graph.Node, ctx json.RawMessage, instance map[string]any, maxPayload int64) outcome {
	out, err := nodeValue(n, ctx, instance)
	if err != nil {
		return outcome{failure: &failure{message: failureMessage(err), nonRetryable: true, errorType: expressionErrorType}}
	}
	if out.predicate != nil {
		return out
	}
	return checkLimits(out, maxPayload)
}

func nodeValue(n *graph.Node, ctx json.RawMessage, instance map[string]any) (outcome, *expr.EvaluationError) {
	switch n.Kind {
	case graph.KindCondition:
		x, err := compiled(n.If)
		if err != nil {
			return outcome{}, err
		}
		v, evalErr := x.Condition(decodeContext(ctx), instance)
		if evalErr != nil {
			return outcome{}, asEvaluationError(n.If, evalErr)
		}
		return outcome{predicate: &v}, nil
	case graph.KindSet:
	default:
		// Not reachable: the run only evaluates nodes for which IsExpression holds.
		return outcome{}, &expr.EvaluationError{Kind: expr.InvalidArgument,
			Detail: fmt.Sprintf("node '%s' is not an expression node", n.ID)}
	}
	members, isObject := objectMembers(ctx)
	if !isObject {
		return outcome{}, &expr.EvaluationError{Kind: expr.TypeMismatch,
			Detail: fmt.Sprintf("set '%s' needs an object context; the context is %s", n.ID, what(ctx))}
	}
	// Every expression sees the same incoming context; none sees another's result. Keys go in
	// sorted order (the canonical graph's), so the first error is the same on every run.
	decoded := decodeContext(ctx)
	keys := make([]string, 0, len(n.Values))
	for k := range n.Values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	values := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		x, err := compiled(n.Values[k])
		if err != nil {
			return outcome{}, err
		}
		v, evalErr := x.Evaluate(decoded, instance)
		if evalErr != nil {
			return outcome{}, asEvaluationError(n.Values[k], evalErr)
		}
		raw, jsonErr := encodeJSON(v)
		if jsonErr != nil {
			return outcome{}, &expr.EvaluationError{Source: n.Values[k], Kind: expr.NotJSON, Detail: jsonErr.Error()}
		}
		values[k] = raw
	}
	return outcome{context: replaceMembers(members, keys, values)}, nil
}

func asEvaluationError(source string, err error) *expr.EvaluationError {
	var ee *expr.EvaluationError
	if errors.As(err, &ee) {
		return ee
	}
	return &expr.EvaluationError{Source: source, Kind: expr.InvalidArgument, Detail: err.Error()}
}

// failureMessage is "<kind>: <detail> (expression '<source>')": it starts with the kind in
// every language, and quotes the source as Python's repr does.
func failureMessage(e *expr.EvaluationError) string {
	if e.Source == "" {
		return fmt.Sprintf("%s: %s", e.Kind, e.Detail)
	}
	return fmt.Sprintf("%s: %s (expression %s)", e.Kind, e.Detail, pyQuote(e.Source))
}

// pyQuote quotes s as Python's repr quotes a string: single quotes unless s holds one and no
// double quote; backslashes, the quote and control characters escaped.
func pyQuote(s string) string {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, c := range s {
		switch {
		case c == '\\' || c == rune(q):
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// decodeContext is the context as expr takes it: numbers as json.Number, so integers past 2^53
// stay exact until the evaluator maps them by value. Invalid JSON (never sent by a server) is null.
func decodeContext(raw json.RawMessage) any {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil
	}
	return v
}

type member struct {
	key   string
	value json.RawMessage
}

// objectMembers is a JSON object's members in their order, values as written; ok is false
// when raw is not an object.
func objectMembers(raw json.RawMessage) (members []member, ok bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	tok, err := d.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := d.Decode(&value); err != nil {
			return nil, false
		}
		members = append(members, member{key, value})
	}
	if tok, err := d.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	return members, true
}

// replaceMembers is the object members with the keys in values replaced where they are, and
// the others added after them in keys' order: the context's untouched values keep their text.
func replaceMembers(members []member, keys []string, values map[string]json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	seen := make(map[string]bool, len(keys))
	write := func(key string, value json.RawMessage) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := encodeJSON(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(value)
	}
	for _, m := range members {
		if v, ok := values[m.key]; ok {
			if seen[m.key] {
				continue // a duplicated key: the one value the set gave, once
			}
			seen[m.key] = true
			write(m.key, v)
			continue
		}
		write(m.key, m.value)
	}
	for _, k := range keys {
		if !seen[k] {
			write(k, values[k])
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// encodeJSON is v's compact JSON, without encoding/json's HTML escaping.
func encodeJSON(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(keepFractions(v)); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// what names a context that is not an object, for a set's type_mismatch.
func what(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "null"
	}
	switch t[0] {
	case 'n':
		return "null"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// keepFractions gives every integral float64 in v (expr.Evaluate leaves one only past
// ±(2^53 - 1): it turns smaller ones into int64) a JSON form that stays a double, as
// `1.8014398509481984e+16`: encoding/json would write `18014398509481984`, which another
// language reads back as an exact integer.
func keepFractions(v any) any {
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) {
			return x
		}
		text := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(text, ".eE") {
			text += ".0"
		}
		return json.Number(text)
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = keepFractions(item)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			out[k] = keepFractions(item)
		}
		return out
	}
	return v
}
