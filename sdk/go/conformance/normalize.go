package conformance

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
)

// normalize re-encodes a JSON value the way the Python worker's round trip (orjson.loads, then
// orjson.dumps) does, so that even values passed through untouched come out byte for byte the
// same: object keys in document order (a repeated key keeps its first place and last value),
// no whitespace, strings unescaped but for '"', '\\' and control characters, integers exact,
// floats in orjson's notation. Invalid JSON is returned unchanged.
func normalize(raw json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := readValue(dec)
	if err != nil {
		return raw
	}
	return v
}

func readValue(dec *json.Decoder) (json.RawMessage, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			var b bytes.Buffer
			b.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				item, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				b.Write(item)
			}
			if _, err := dec.Token(); err != nil { // the closing ']'
				return nil, err
			}
			b.WriteByte(']')
			return b.Bytes(), nil
		}
		o := &object{vals: map[string]json.RawMessage{}}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := k.(string)
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			if _, had := o.vals[key]; !had {
				o.keys = append(o.keys, key)
			}
			o.vals[key] = v
		}
		if _, err := dec.Token(); err != nil { // the closing '}'
			return nil, err
		}
		return o.encode(), nil
	case string:
		return json.RawMessage(jsonString(t)), nil
	case json.Number:
		return numberLiteral(string(t)), nil
	case bool:
		return json.RawMessage(strconv.FormatBool(t)), nil
	}
	return json.RawMessage("null"), nil
}

// numberLiteral is a number as Python re-encodes it: an integer literal stays an exact integer
// ("-0" becomes "0"), anything with a fraction or exponent is a float.
func numberLiteral(s string) json.RawMessage {
	if !strings.ContainsAny(s, ".eE") {
		if i, ok := new(big.Int).SetString(s, 10); ok {
			return json.RawMessage(i.String())
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return json.RawMessage(s)
	}
	return formatFloat(f)
}
