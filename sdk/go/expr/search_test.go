package expr

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// The SDK's indexOf and lastIndexOf give what the strings extension's own give, errors included,
// for every offset in and around each string, with code points of one to four bytes and bytes
// that are not UTF-8; except where the profile follows cel-spec: an offset past the end fails,
// and lastIndexOf from the end searches the whole string.
func TestSearchIsTheStringsExtensions(t *testing.T) {
	e, err := celEnv()
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"", "a", "abc", "abcabc", "hello mellow", "aaaa", "héllo wörld", "😀a😀b😀", "\xffa\xfe", "ab\xff\xff", "a\ufffdb"}
	subs := []string{"", "a", "b", "ab", "aa", "ello", "ö", "😀", "😀b", "\ufffd", "\xff", "abcabcabc"}
	for _, src := range []string{
		`ctx.t.indexOf(ctx.s)`, `ctx.t.lastIndexOf(ctx.s)`,
		`ctx.t.indexOf(ctx.s, ctx.o)`, `ctx.t.lastIndexOf(ctx.s, ctx.o)`,
	} {
		checked, iss := e.Compile(src)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		library, err := e.Program(checked) // the strings extension's own functions
		if err != nil {
			t.Fatal(err)
		}
		whole, _ := e.Compile(`ctx.t.lastIndexOf(ctx.s)`)
		fromEnd, err := e.Program(whole)
		if err != nil {
			t.Fatal(err)
		}
		own, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range texts {
			for _, sub := range subs {
				for o := int64(-2); o <= int64(len(text))+2; o++ {
					ctx := map[string]any{"t": text, "s": sub, "o": o}
					want, _, werr := library.Eval(map[string]any{"ctx": ctx})
					size := int64(utf8.RuneCountInString(asRunes(text)))
					if strings.Contains(src, "ctx.o") && o > size {
						want, werr = nil, fmt.Errorf("index out of range: %d", o)
					} else if src == `ctx.t.lastIndexOf(ctx.s, ctx.o)` && o == size {
						want, _, werr = fromEnd.Eval(map[string]any{"ctx": ctx})
					}
					got, gerr := own.Evaluate(ctx, nil)
					var ee *EvaluationError
					if werr != nil && !(errors.As(gerr, &ee) && ee.Detail == werr.Error()) ||
						werr == nil && (gerr != nil || got != want.Value()) {
						t.Fatalf("%s with t %q, s %q, o %d: %v (%v); the extension's: %v (%v)", src, text, sub, o, got, gerr, want, werr)
					}
				}
			}
		}
	}
}
