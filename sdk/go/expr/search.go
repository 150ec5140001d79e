package expr

import (
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// search is the strings extension's indexOf or lastIndexOf in time linear in its strings
// (docs/expressions.md, "The time limit"): cel-go's own turns both strings into code points and
// compares them at every offset, which took it 63 ms to search 2 MB for a near miss of 1 MB.
// Here Go's search runs on the UTF-8 bytes, and only offsets are counted in code points. An
// offset outside 0..size fails with "index out of range", as in cel-spec and the other
// implementations (cel-go's own gives -1 past the end). handled is false when the arguments are
// not what the two take.
func search(function string, args []ref.Val) (v ref.Val, handled bool) {
	text, ok1 := args[0].(types.String)
	sub, ok2 := args[1].(types.String)
	if !ok1 || !ok2 {
		return nil, false
	}
	t, s := asRunes(string(text)), asRunes(string(sub))
	if len(args) == 2 {
		if function == "lastIndexOf" {
			return lastIndexOf(t, s), true
		}
		return indexOf(t, s, 0), true
	}
	offset, ok := args[2].(types.Int)
	if !ok {
		return nil, false
	}
	if offset < 0 || int64(offset) > int64(utf8.RuneCountInString(t)) {
		return types.NewErr("index out of range: %d", offset), true
	}
	if function == "lastIndexOf" {
		return lastIndexOfFrom(t, s, int(offset)), true
	}
	return indexOf(t, s, int(offset)), true
}

// indexOf is where sub first occurs in text at code point offset (within 0..size) or later, or
// -1; an empty sub is found at offset.
func indexOf(text, sub string, offset int) types.Int {
	if sub == "" {
		return types.Int(offset)
	}
	from := byteOffset(text, offset)
	i := strings.Index(text[from:], sub)
	if i < 0 {
		return -1
	}
	return types.Int(offset + utf8.RuneCountInString(text[from:from+i]))
}

// lastIndexOf is where sub last occurs in text, or -1; an empty sub is found at the end.
func lastIndexOf(text, sub string) types.Int {
	if sub == "" {
		return types.Int(utf8.RuneCountInString(text))
	}
	return codePoints(text, strings.LastIndex(text, sub))
}

// lastIndexOfFrom is where sub last occurs in text starting at code point offset (within
// 0..size) or earlier, or -1; an empty sub is found at offset.
func lastIndexOfFrom(text, sub string, offset int) types.Int {
	if sub == "" {
		return types.Int(offset)
	}
	at := byteOffset(text, offset)
	// An occurrence that starts at or before byte at ends by byte at + len(sub).
	return codePoints(text, strings.LastIndex(text[:min(at+len(sub), len(text))], sub))
}

// byteOffset is the byte where code point offset (within 0..size) starts in text.
func byteOffset(text string, offset int) int {
	n := 0
	for i := range text {
		if n == offset {
			return i
		}
		n++
	}
	return len(text)
}

// codePoints is byte offset i of text in code points, or -1 for -1.
func codePoints(text string, i int) types.Int {
	if i < 0 {
		return -1
	}
	return types.Int(utf8.RuneCountInString(text[:i]))
}

// asRunes is s as cel-go's search sees it, each byte that is not UTF-8 a U+FFFD of its own, so
// that a search of the bytes finds what a search of the code points does. Only a context built
// by hand can hold such bytes; JSON's strings and CEL's are UTF-8.
func asRunes(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s))
}

// split is the strings extension's split, but for an empty string split on an empty separator,
// which cel-spec, cel-cpp and the other implementations split into one empty string (with no
// count, or one that is not 0) where Go's strings.Split gives no part at all. A count of 0 gives
// no part, a negative one every part, n > 0 at most n, the last holding the rest; an empty
// separator splits between code points. Go's search is linear in the strings (strings.Index
// turns to Rabin-Karp on a long pattern that keeps nearly matching). handled is false when the
// arguments are not what split takes.
func split(args []ref.Val) (v ref.Val, handled bool) {
	text, ok1 := args[0].(types.String)
	sep, ok2 := args[1].(types.String)
	if !ok1 || !ok2 {
		return nil, false
	}
	n := types.Int(-1)
	if len(args) == 3 {
		if n, ok1 = args[2].(types.Int); !ok1 {
			return nil, false
		}
	}
	var parts []string
	switch {
	case n == 0:
		parts = []string{}
	case text == "" && sep == "":
		parts = []string{""}
	case n < 0:
		parts = strings.Split(string(text), string(sep))
	default:
		parts = strings.SplitN(string(text), string(sep), int(n))
	}
	return types.DefaultTypeAdapter.NativeToValue(parts), true
}
