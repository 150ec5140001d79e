// Package tracecontext holds W3C trace context parsing and Wiggle's derived span identities
// (docs/observability.md, "Identities"): the same functions as the server's and every other
// SDK's, held to the vectors in spec/tracing/ids.json.
package tracecontext

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Context is a parsed traceparent: 32 and 16 lowercase hex digits and the flags byte.
type Context struct {
	TraceID string
	SpanID  string
	Flags   byte
}

// Traceparent formats c as a version 00 traceparent.
func (c Context) Traceparent() string {
	return fmt.Sprintf("00-%s-%s-%02x", c.TraceID, c.SpanID, c.Flags)
}

var traceparentRe = regexp.MustCompile(`^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$`)

// Parse reads a W3C traceparent; ok is false when it is malformed, oversized or all-zero.
func Parse(value string) (c Context, ok bool) {
	if value == "" || len(value) > 512 {
		return c, false
	}
	m := traceparentRe.FindStringSubmatch(strings.TrimSpace(value))
	if m == nil || m[1] == "ff" || (m[1] == "00" && m[5] != "") {
		return c, false
	}
	if m[2] == strings.Repeat("0", 32) || m[3] == strings.Repeat("0", 16) {
		return c, false
	}
	flags, _ := strconv.ParseUint(m[4], 16, 8)
	return Context{TraceID: m[2], SpanID: m[3], Flags: byte(flags)}, true
}

func digest(text string, size int) string {
	sum := sha256.Sum256([]byte(text))
	raw := sum[:size]
	zero := true
	for _, b := range raw {
		if b != 0 {
			zero = false
			break
		}
	}
	if zero {
		raw[size-1] = 1
	}
	return hex.EncodeToString(raw)
}

// TraceIDFor is the trace of an instance tree whose start carried no traceparent.
func TraceIDFor(rootInstanceID string) string {
	return digest("wiggle.trace\n"+rootInstanceID, 16)
}

// InstanceSpanID is the instance's span: the parent of its steps and the server's spans.
func InstanceSpanID(instanceID string) string {
	return digest("wiggle.instance\n"+instanceID, 8)
}

// LoopsKey is `id=count` of every loop the token is inside, sorted by id, joined by commas.
func LoopsKey(loopCounts map[string]int) string {
	keys := make([]string, 0, len(loopCounts))
	for k := range loopCounts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Itoa(loopCounts[k])
	}
	return strings.Join(parts, ",")
}

// StepSpanID is a step attempt's span.
func StepSpanID(instanceID, taskID, nodeID string, attempt int, loopCounts map[string]int) string {
	return digest(fmt.Sprintf("wiggle.step\n%s\n%s\n%s\n%d\n%s", instanceID, taskID, nodeID, attempt, LoopsKey(loopCounts)), 8)
}

// Derive is the trace an instance tree is in: its start's traceparent (trace id and flags), or
// the derived one (sampled) when there was none; SpanID is the root's instance span.
func Derive(rootInstanceID, traceparent string) Context {
	if c, ok := Parse(traceparent); ok {
		return Context{TraceID: c.TraceID, SpanID: InstanceSpanID(rootInstanceID), Flags: c.Flags}
	}
	return Context{TraceID: TraceIDFor(rootInstanceID), SpanID: InstanceSpanID(rootInstanceID), Flags: 1}
}
