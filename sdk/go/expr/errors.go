package expr

import (
	"fmt"
	"regexp"
)

// Kind is what an evaluation error is (docs/expressions.md, "Errors").
type Kind string

// The eight kinds of the profile.
const (
	NoSuchKey       Kind = "no_such_key"      // a map (the context is one) has no such key
	TypeMismatch    Kind = "type_mismatch"    // no overload takes these types (1 + "a", a field of a number)
	DivisionByZero  Kind = "division_by_zero" // / or % by int zero
	Overflow        Kind = "overflow"         // an int past 64 bits, int() of a double out of range
	OutOfRange      Kind = "out_of_range"     // a list index, substring() or charAt() past the end
	InvalidArgument Kind = "invalid_argument" // a conversion that cannot be made (int("x"), timestamp("nope"))
	NotJSON         Kind = "not_json"         // the result has no JSON form (bytes, NaN, an int past 2^53 - 1)
	NotBoolean      Kind = "not_boolean"      // a condition gave something other than true or false
)

// Kinds is every kind of the profile.
var Kinds = []Kind{NoSuchKey, TypeMismatch, DivisionByZero, Overflow, OutOfRange, InvalidArgument, NotJSON, NotBoolean}

// EvaluationError is an expression that failed when evaluated: a non-retryable failure of its
// node. Detail is the library's message (or Wiggle's, for not_json and not_boolean).
type EvaluationError struct {
	Source string
	Kind   Kind
	Detail string
}

func (e *EvaluationError) Error() string {
	return fmt.Sprintf("expression '%s' failed (%s): %s", e.Source, e.Kind, e.Detail)
}

// Problem is one reason an expression is refused, at a 1-based Line and Column inside it.
type Problem struct {
	Line    int
	Column  int
	Message string
}

// InvalidError is an expression the profile or CEL's checker refuses; Problems are all of them.
type InvalidError struct {
	Source   string
	Problems []Problem
}

func (e *InvalidError) Error() string {
	p := e.Problems[0]
	return fmt.Sprintf("expression '%s' is invalid: %d:%d: %s", e.Source, p.Line, p.Column, p.Message)
}

// iterationBudgetDetail is the detail of an evaluation stopped by IterationBudget, in the
// words the other SDKs use.
const iterationBudgetDetail = "more than %d comprehension iterations in one evaluation"

// timeLimitDetail is the detail of an evaluation stopped by TimeLimit, in the words the other
// SDKs use.
const timeLimitDetail = "the evaluation ran longer than 1 second"

// kinds sorts cel-go's run-time error messages into the profile's kinds; first match wins,
// anything else is invalid_argument (a conversion that cannot be made).
var kinds = []struct {
	kind    Kind
	pattern *regexp.Regexp
}{
	{NoSuchKey, regexp.MustCompile(`no such key`)},
	{DivisionByZero, regexp.MustCompile(`division by zero|modulus by zero`)},
	{Overflow, regexp.MustCompile(`overflow|out of int range|out of uint range|range error`)},
	{OutOfRange, regexp.MustCompile(`index out of bounds|index out of range|index '-?\d+' out of range|out of range in list`)},
	{TypeMismatch, regexp.MustCompile(`no such overload|no matching overload|does not support field selection|unsupported index type|invalid type for field selection`)},
}

func kindOf(message string) Kind {
	for _, k := range kinds {
		if k.pattern.MatchString(message) {
			return k.kind
		}
	}
	return InvalidArgument
}
