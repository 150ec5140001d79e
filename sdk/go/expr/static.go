package expr

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// The profile's static rules, checked on the source text before CEL sees it: a port of
// wiggle/expressions/_static.py (and its lists, _profile.py), so that every implementation
// refuses the same expressions.

// MaxSourceChars is the longest expression allowed, in code points.
const MaxSourceChars = 2048

// MaxDepth is how deeply brackets of any kind, ( [ {, may nest.
const MaxDepth = 24

// comprehensions are the macros that iterate; one may not run inside another's arguments.
var comprehensions = []string{"all", "exists", "exists_one", "map", "filter"}

// functions are the global and member functions an expression may call.
var functions = []string{
	// the standard library
	"has", "size", "contains", "startsWith", "endsWith", "int", "double", "string", "bool",
	"timestamp", "duration", "dyn",
	"getFullYear", "getMonth", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getHours",
	"getMinutes", "getSeconds", "getMilliseconds",
	// the strings extension
	"charAt", "indexOf", "lastIndexOf", "lowerAscii", "upperAscii", "replace", "split",
	"substring", "trim", "join",
}

// namespacedFunctions are called by a dotted name (the math extension).
var namespacedFunctions = []string{
	"math.greatest", "math.least", "math.ceil", "math.floor", "math.round", "math.trunc",
	"math.abs", "math.sign",
}

type token struct {
	kind   string // "ident" | "quoted" (a `backquoted` field name) | "number" | "string" | "punct"
	text   string
	offset int // in code points, from 0
}

var (
	identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)
	// quotedRe is a field selected by a quoted name, {'content-type': 'x'}.`content-type`:
	// CEL's grammar allows letters, digits and _ . - / and space between the backquotes. Never a
	// call or a function name.
	quotedRe      = regexp.MustCompile("^`[A-Za-z0-9_./\\- ]+`")
	numberRe      = regexp.MustCompile(`^(?:0[xX][0-9a-fA-F]+[uU]?|(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?[uU]?)`)
	stringStartRe = regexp.MustCompile(`^(?:[rR][bB]?|[bB][rR]?)?("""|'''|"|')`)
	spaceRe       = regexp.MustCompile(`^(?:\s+|//[^\n]*)`)
	puncts        = []string{"&&", "||", "==", "!=", "<=", ">=", "?.", "(", ")", "[", "]", "{", "}", ".", ",", ":", "?", "!", "<", ">", "+", "-", "*", "/", "%"}
)

type lexError struct {
	offset  int
	message string
}

// lex is the tokens of source (offsets in code points); a lexError at the first character
// that starts none.
func lex(source string) ([]token, *lexError) {
	src := []rune(source)
	var toks []token
	at := 0
	rest := func() string { return string(src[at:]) }
	for at < len(src) {
		r := rest()
		if m := spaceRe.FindString(r); m != "" {
			at += utf8.RuneCountInString(m)
			continue
		}
		if m := stringStartRe.FindStringSubmatch(r); m != nil {
			raw := strings.ContainsAny(m[0], "rR")
			end, err := stringEnd(src, at, at+utf8.RuneCountInString(m[0]), []rune(m[1]), raw)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{"string", string(src[at:end]), at})
			at = end
			continue
		}
		if m := identRe.FindString(r); m != "" {
			toks = append(toks, token{"ident", m, at})
			at += len(m)
			continue
		}
		if m := quotedRe.FindString(r); m != "" {
			toks = append(toks, token{"quoted", m, at})
			at += len(m)
			continue
		}
		if m := numberRe.FindString(r); m != "" {
			toks = append(toks, token{"number", m, at})
			at += len(m)
			continue
		}
		found := ""
		for _, p := range puncts {
			if strings.HasPrefix(r, p) {
				found = p
				break
			}
		}
		if found == "" {
			return nil, &lexError{at, fmt.Sprintf("unexpected character %q", src[at])}
		}
		toks = append(toks, token{"punct", found, at})
		at += len(found)
	}
	return toks, nil
}

func stringEnd(src []rune, start, at int, quote []rune, raw bool) (int, *lexError) {
	for at < len(src) {
		if hasPrefixAt(src, at, quote) {
			return at + len(quote), nil
		}
		if src[at] == '\\' && !raw {
			at += 2
			continue
		}
		if src[at] == '\n' && len(quote) == 1 {
			break
		}
		at++
	}
	return 0, &lexError{start, "this string is never closed"}
}

func hasPrefixAt(src []rune, at int, prefix []rune) bool {
	return at+len(prefix) <= len(src) && slices.Equal(src[at:at+len(prefix)], prefix)
}

type problemAt struct {
	offset  int
	message string
}

// checkSource is every static rule source breaks, each at its line and column (empty: it may
// go to CEL).
func checkSource(source string) []Problem {
	var found []problemAt
	switch n := utf8.RuneCountInString(source); {
	case strings.TrimSpace(source) == "":
		found = []problemAt{{0, "the expression is empty"}}
	case n > MaxSourceChars:
		found = []problemAt{{MaxSourceChars, fmt.Sprintf("the expression is %d characters long; at most %d", n, MaxSourceChars)}}
	default:
		found = checkTokens(source)
	}
	problems := make([]Problem, len(found))
	for i, p := range found {
		line, column := position(source, p.offset)
		problems[i] = Problem{Line: line, Column: column, Message: p.message}
	}
	return problems
}

func checkTokens(source string) []problemAt {
	toks, lerr := lex(source)
	if lerr != nil {
		return []problemAt{{lerr.offset, lerr.message}}
	}
	var problems []problemAt
	// The open brackets, each noting whether it is the argument list of a comprehension macro.
	var stack []bool
	for i, tok := range toks {
		switch {
		case tok.kind == "punct" && strings.Contains("([{", tok.text):
			called := calledName(toks, i)
			comprehension := tok.text == "(" && slices.Contains(comprehensions, called) && isMember(toks, i)
			if comprehension && slices.Contains(stack, true) {
				problems = append(problems, problemAt{toks[i-1].offset, fmt.Sprintf(
					"%s() inside another comprehension: the profile allows one level of "+
						"map/filter/all/exists/exists_one, so an expression's cost stays linear in its input", called)})
			}
			stack = append(stack, comprehension)
			if len(stack) > MaxDepth {
				return append(problems, problemAt{tok.offset, fmt.Sprintf("nested more than %d levels deep", MaxDepth)})
			}
			if called != "" && !comprehension {
				name := qualified(toks, i, called)
				if !slices.Contains(functions, name) && !slices.Contains(namespacedFunctions, name) {
					problems = append(problems, problemAt{toks[i-1].offset, fmt.Sprintf(
						"%s() is not a function of the Wiggle CEL profile (docs/expressions.md lists them)", name)})
				}
			}
		case tok.kind == "punct" && strings.Contains(")]}", tok.text) && len(stack) > 0:
			stack = stack[:len(stack)-1]
		}
	}
	return problems
}

// calledName is the identifier right before the ( at i ("": not a call).
func calledName(toks []token, i int) string {
	if toks[i].text != "(" || i == 0 || toks[i-1].kind != "ident" {
		return ""
	}
	return toks[i-1].text
}

// isMember is whether the call at i is receiver.name(.
func isMember(toks []token, i int) bool {
	return i >= 2 && toks[i-2].text == "."
}

// qualified is math.greatest for math.greatest(; a member call's bare name otherwise.
func qualified(toks []token, i int, name string) string {
	if i >= 3 && toks[i-2].text == "." && toks[i-3].kind == "ident" {
		dotted := toks[i-3].text + "." + name
		before := ""
		if i >= 4 {
			before = toks[i-4].text
		}
		if slices.Contains(namespacedFunctions, dotted) && before != "." {
			return dotted
		}
	}
	return name
}

// position is the 1-based line and column of code point offset in source.
func position(source string, offset int) (int, int) {
	src := []rune(source)
	offset = max(0, min(offset, len(src)))
	line, column := 1, 1
	for _, r := range src[:offset] {
		if r == '\n' {
			line, column = line+1, 1
		} else {
			column++
		}
	}
	return line, column
}
