package expr

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// MaxSafeInteger is the largest integer every implementation's JSON reads exactly (2^53 - 1):
// integral numbers within ±MaxSafeInteger are CEL ints, any other number a double; an int
// result outside it has no JSON form.
const MaxSafeInteger = 1<<53 - 1

// errNotJSON is a CEL result with no JSON form under the profile.
type errNotJSON struct{ detail string }

func (e errNotJSON) Error() string { return e.detail }

// toCEL is the CEL form of a JSON value as encoding/json decodes it: nil, bool, string,
// float64 or json.Number, []any and map[string]any. Go integers and float32 are taken as well,
// for callers that build contexts by hand. Every number is mapped by its value: an integral
// one within ±MaxSafeInteger becomes an int64, any other a float64.
func toCEL(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, string:
		return x, nil
	case float64:
		return number(x), nil
	case float32:
		return number(float64(x)), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return integer(i), nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("not a JSON number: %q", string(x))
		}
		return number(f), nil
	case int:
		return integer(int64(x)), nil
	case int8:
		return integer(int64(x)), nil
	case int16:
		return integer(int64(x)), nil
	case int32:
		return integer(int64(x)), nil
	case int64:
		return integer(x), nil
	case uint:
		return unsigned(uint64(x)), nil
	case uint8:
		return unsigned(uint64(x)), nil
	case uint16:
		return unsigned(uint64(x)), nil
	case uint32:
		return unsigned(uint64(x)), nil
	case uint64:
		return unsigned(x), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := toCEL(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := toCEL(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	default:
		return nil, fmt.Errorf("not a JSON value: %T", v)
	}
}

func number(f float64) any {
	if f == math.Trunc(f) && f >= -MaxSafeInteger && f <= MaxSafeInteger {
		return int64(f)
	}
	return f
}

func integer(i int64) any {
	if i >= -MaxSafeInteger && i <= MaxSafeInteger {
		return i
	}
	return float64(i)
}

func unsigned(u uint64) any {
	if u <= MaxSafeInteger {
		return int64(u)
	}
	return float64(u)
}

// fromCEL is the JSON form of a CEL result: nil, bool, string, int64 (every integral number
// within ±MaxSafeInteger, whatever its CEL type), float64, []any, map[string]any, and strings
// for timestamps and durations. errNotJSON when it has none.
func fromCEL(v ref.Val) (any, error) {
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.String:
		return string(x), nil
	case types.Int:
		if x >= -MaxSafeInteger && x <= MaxSafeInteger {
			return int64(x), nil
		}
		return nil, errNotJSON{fmt.Sprintf("the integer %d is outside ±(2^53 - 1): JSON cannot carry it exactly", int64(x))}
	case types.Uint:
		if x <= MaxSafeInteger {
			return int64(x), nil
		}
		return nil, errNotJSON{fmt.Sprintf("the integer %d is outside ±(2^53 - 1): JSON cannot carry it exactly", uint64(x))}
	case types.Double:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, errNotJSON{fmt.Sprintf("the double %v has no JSON form", f)}
		}
		if f == math.Trunc(f) && f >= -MaxSafeInteger && f <= MaxSafeInteger {
			return int64(f), nil
		}
		return f, nil
	case types.Timestamp:
		return formatTimestamp(x.Time), nil
	case types.Duration:
		return formatDuration(x.Duration), nil
	case types.Bytes:
		return nil, errNotJSON{"a bytes value has no JSON form (convert it with string())"}
	case traits.Lister:
		out := make([]any, 0, int(x.Size().(types.Int)))
		for it := x.Iterator(); it.HasNext() == types.True; {
			e, err := fromCEL(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	case traits.Mapper:
		out := make(map[string]any, int(x.Size().(types.Int)))
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, errNotJSON{fmt.Sprintf("a map key %v (%s) is not a string; JSON object keys are", k, k.Type().TypeName())}
			}
			e, err := fromCEL(x.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	default:
		return nil, errNotJSON{fmt.Sprintf("a %s value has no JSON form", v.Type().TypeName())}
	}
}

// formatTimestamp is RFC 3339 in UTC with Z; the fraction truncated to microseconds, its
// trailing zeros dropped.
func formatTimestamp(t time.Time) string {
	return t.UTC().Truncate(time.Microsecond).Format("2006-01-02T15:04:05.999999Z07:00")
}

// formatDuration is seconds followed by s, as CEL's duration() reads them: 90s, -1.5s,
// 0.000001s; truncated (toward zero) to microseconds.
func formatDuration(d time.Duration) string {
	micros := d.Microseconds()
	sign := ""
	if micros < 0 {
		sign = "-"
		micros = -micros
	}
	whole, frac := micros/1_000_000, micros%1_000_000
	text := sign + strconv.FormatInt(whole, 10)
	if frac != 0 {
		text += strings.TrimRight(fmt.Sprintf(".%06d", frac), "0")
	}
	return text + "s"
}
