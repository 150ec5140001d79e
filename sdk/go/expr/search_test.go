package expr

import (
	"errors"
	"fmt"
	"reflect"
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

// The SDK's split gives what the strings extension's own gives, for every count in and around
// each string's parts, with code points of one to four bytes and bytes that are not UTF-8;
// except an empty string split on an empty separator, which is one empty string in cel-spec and
// the other implementations (the extension gives no part).
func TestSplitIsTheStringsExtensions(t *testing.T) {
	e, err := celEnv()
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"", "a", "abc", "a,b,,c", ",", ",,", "héllo wörld", "😀a😀b😀", "\xffa\xfe", "ab\xff\xff"}
	seps := []string{"", ",", "a", "b", "ab", "ö", "😀", "\xff", "abcabcabc"}
	for _, src := range []string{`ctx.t.split(ctx.s)`, `ctx.t.split(ctx.s, ctx.n)`} {
		checked, iss := e.Compile(src)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		library, err := e.Program(checked)
		if err != nil {
			t.Fatal(err)
		}
		own, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range texts {
			for _, sep := range seps {
				for n := int64(-2); n <= int64(len(text))+2; n++ {
					ctx := map[string]any{"t": text, "s": sep, "n": n}
					got, gerr := own.Evaluate(ctx, nil)
					if gerr != nil {
						t.Fatalf("%s with t %q, s %q, n %d: %v", src, text, sep, n, gerr)
					}
					want := []any{}
					if text == "" && sep == "" && (n != 0 || !strings.Contains(src, "ctx.n")) {
						want = []any{""}
					} else {
						v, _, werr := library.Eval(map[string]any{"ctx": ctx})
						if werr != nil {
							t.Fatal(werr)
						}
						parts, err := v.ConvertToNative(reflect.TypeOf([]string{}))
						if err != nil {
							t.Fatal(err)
						}
						for _, p := range parts.([]string) {
							want = append(want, p)
						}
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%s with t %q, s %q, n %d: %q; want %q", src, text, sep, n, got, want)
					}
				}
			}
		}
	}
}

// Go's split is linear in its strings, a near miss in the middle of a long separator included.
// A split that is not takes minutes on these strings (Guava's took 489 seconds), and fails under
// the limit of a minute; a linear one takes milliseconds, which no loaded machine stretches to it.
func TestSplitIsLinear(t *testing.T) {
	SetTimeLimit(t, RoomyTimeLimit)
	x, err := Compile(`ctx.a.split(ctx.c).size() + ctx.a.split(ctx.d, 3).size() + ctx.a.split(ctx.e).size()`)
	if err != nil {
		t.Fatal(err)
	}
	a := strings.Repeat("a", 2_000_000)
	half := strings.Repeat("a", 500_000)
	ctx := map[string]any{"a": a, "c": half + "b" + half, "d": half + "b", "e": strings.Repeat("a", 40)}
	if v, err := x.Evaluate(ctx, nil); err != nil || v != int64(1+1+50_001) {
		t.Fatalf("%v (%v)", v, err)
	}
}
