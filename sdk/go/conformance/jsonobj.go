package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// object is a JSON object that keeps its keys in order, so that "ctx with K = V" replaces K in
// place or appends it, exactly like Python's {**ctx, K: V}; the results then match the Python
// worker byte for byte, not merely as parsed JSON.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

// parseObject reads raw as an object; ok is false for any other JSON value.
func parseObject(raw json.RawMessage) (o *object, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	o = &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		o.set(key, v)
	}
	return o, true
}

// get is the value under key, nil when missing.
func (o *object) get(key string) json.RawMessage { return o.vals[key] }

// set stores v (normalised) under key: in place when key exists, else appended.
func (o *object) set(key string, v json.RawMessage) {
	if _, had := o.vals[key]; !had {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = normalize(v)
}

// encode writes the object compactly, as orjson does: no whitespace, UTF-8 kept as is; every
// value was normalised when it was set.
func (o *object) encode() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(k))
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// jsonString encodes s as orjson does: only '"', '\\' and control characters are escaped (no
// HTML escaping, non-ASCII left as UTF-8).
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// number is a JSON number: an integer (isInt) or a float. Python tells int from float by the
// literal, so does this: "2" is an int, "2.0" a float.
type number struct {
	isInt bool
	i     int64
	f     float64
}

// parseNumber reads raw as a number; ok is false for any other value (booleans included).
func parseNumber(raw json.RawMessage) (n number, ok bool) {
	s := strings.TrimSpace(string(raw))
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return n, false
	}
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return number{isInt: true, i: i}, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return n, false
	}
	return number{f: f}, true
}

// intOr0 is Python's _int: the value when it is an integer, else 0.
func intOr0(raw json.RawMessage) int64 {
	if n, ok := parseNumber(raw); ok && n.isInt {
		return n.i
	}
	return 0
}

func (n number) float() float64 {
	if n.isInt {
		return float64(n.i)
	}
	return n.f
}

func (n number) encode() json.RawMessage {
	if n.isInt {
		return json.RawMessage(strconv.FormatInt(n.i, 10))
	}
	return formatFloat(n.f)
}

// formatFloat writes a float as orjson does: plain decimals for 1e-6 <= |f| < 1e16 (with ".0"
// when integral), else the shortest mantissa with an unpadded exponent ("1e+16", "2.5e-7").
func formatFloat(f float64) json.RawMessage {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return json.RawMessage("null")
	}
	if abs := math.Abs(f); abs == 0 || abs >= 1e-6 && abs < 1e16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return json.RawMessage(s)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
	return json.RawMessage(mant + "e" + sign + digits)
}

// parseArray reads raw as an array of raw elements; ok is false for any other value.
func parseArray(raw json.RawMessage) (items []json.RawMessage, ok bool) {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || s[0] != '[' {
		return nil, false
	}
	if err := json.Unmarshal(s, &items); err != nil {
		return nil, false
	}
	return items, true
}

// encodeArray writes items compactly.
func encodeArray(items []json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(normalize(it))
	}
	b.WriteByte(']')
	return b.Bytes()
}
