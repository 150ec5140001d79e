// Package expr evaluates expressions under the Wiggle CEL profile (docs/expressions.md) with
// cel-go and its strings and math extensions, for the local modes. It must give the answer the
// server's evaluator (wiggle/expressions) gives; spec/conformance/expressions/vectors.json holds
// the cases both pass.
//
// Compile checks an expression (the profile's static rules on the source, then CEL's parser and
// type checker with ctx declared dyn and instance map(string, dyn)); Evaluate maps a JSON context
// to CEL by value (an integral number within ±(2^53 - 1) is an int, any other a double),
// evaluates, and maps the result back to JSON, turning every failure into an *EvaluationError
// whose Kind is one of the profile's eight.
//
// Contexts are taken as encoding/json decodes them: float64 numbers by default, or json.Number
// when decoded with (*json.Decoder).UseNumber (which keeps integers past 2^53 exact until they
// are mapped, so both give the same CEL value). Results are JSON-ready: nil, bool, string,
// int64 for every integral number, float64 for any other, []any and map[string]any, and strings
// for timestamps and durations.
package expr

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"
)

// IterationBudget is the profile's limit on comprehension iterations in one evaluation, across
// all its comprehensions (docs/expressions.md, "Limits"): each element a comprehension visits
// counts one. Past it the evaluation fails with invalid_argument.
const IterationBudget = 10_000

// TimeLimit is the profile's limit on how long one evaluation may run, on the monotonic clock
// from the start of Evaluate (docs/expressions.md, "The time limit"). Past it the evaluation
// stops and fails with invalid_argument.
const TimeLimit = time.Second

// timeLimit is the limit Evaluate enforces: TimeLimit, but in this package's tests, which set a
// longer one for the evaluations that are not about it (export_test.go).
var timeLimit = TimeLimit

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

func celEnv() (*cel.Env, error) {
	envOnce.Do(func() {
		env, envErr = cel.NewEnv(
			cel.Variable("ctx", cel.DynType),
			cel.Variable("instance", cel.MapType(cel.StringType, cel.DynType)),
			ext.Strings(),
			ext.Math(),
		)
	})
	return env, envErr
}

// Expression is a checked expression, ready to evaluate any number of times (safe for
// concurrent use).
type Expression struct {
	// Source is the expression as written.
	Source string
	// ResultType is CEL's name of the checked type: "bool", "dyn", "int", ...
	ResultType string
	program    cel.Program
}

// Compile checks source against the profile and CEL's type checker. It fails with an
// *InvalidError listing every problem found, each at a line and column inside the expression.
func Compile(source string) (*Expression, error) {
	if problems := checkSource(source); len(problems) > 0 {
		return nil, &InvalidError{Source: source, Problems: problems}
	}
	e, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("expr: the CEL environment: %w", err)
	}
	checked, iss := e.Compile(source)
	if iss != nil && iss.Err() != nil {
		var problems []Problem
		for _, ce := range iss.Errors() {
			loc := ce.Location
			problems = append(problems, Problem{Line: loc.Line(), Column: loc.Column() + 1, Message: tidy(ce.Message)})
		}
		if len(problems) == 0 {
			problems = []Problem{{Line: 1, Column: 1, Message: iss.Err().Error()}}
		}
		return nil, &InvalidError{Source: source, Problems: problems}
	}
	sizes := planSizes(checked.NativeRep())
	program, err := e.Program(checked, cel.CustomDecorator(sizes.decorator()))
	if err != nil {
		return nil, &InvalidError{Source: source, Problems: []Problem{{Line: 1, Column: 1, Message: err.Error()}}}
	}
	return &Expression{Source: source, ResultType: checked.OutputType().String(), program: program}, nil
}

func tidy(message string) string {
	message = strings.ReplaceAll(message, " (in container '')", "")
	if strings.HasPrefix(message, "Syntax error: mismatched input '<EOF>'") {
		return "Syntax error: the expression ends too early"
	}
	return message
}

// Evaluate is the JSON value of the expression for this context and instance (nil: empty);
// an *EvaluationError when CEL fails or the result has no JSON form.
func (x *Expression) Evaluate(ctx any, instance map[string]any) (any, error) {
	limits := &spent{start: time.Now()}
	c, err := toCEL(ctx)
	if err != nil {
		return nil, x.fail(InvalidArgument, err.Error())
	}
	var inst any = map[string]any{}
	if instance != nil {
		if inst, err = toCEL(instance); err != nil {
			return nil, x.fail(InvalidArgument, err.Error())
		}
	}
	out, _, err := x.program.Eval(map[string]any{"ctx": c, "instance": inst, spentName: limits})
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == overLimit {
			return nil, x.fail(InvalidArgument, cancelled.Message)
		}
		return nil, x.fail(kindOf(err.Error()), err.Error())
	}
	if types.IsError(out) {
		msg := fmt.Sprint(out)
		return nil, x.fail(kindOf(msg), msg)
	}
	if left := SizeBudget; !resultWithin(out, &left) {
		return nil, x.fail(NotJSON, fmt.Sprintf("the result holds more than %d characters, elements and entries", SizeBudget))
	}
	v, err := fromCEL(out)
	if err != nil {
		return nil, x.fail(NotJSON, err.Error())
	}
	return v, nil
}

// Condition is Evaluate for a choice arm, filter or while: the result must be a bool, or it
// fails with not_boolean.
func (x *Expression) Condition(ctx any, instance map[string]any) (bool, error) {
	v, err := x.Evaluate(ctx, instance)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, x.fail(NotBoolean, fmt.Sprintf("a condition must be a bool; it gave %#v", v))
	}
	return b, nil
}

func (x *Expression) fail(kind Kind, detail string) *EvaluationError {
	return &EvaluationError{Source: x.Source, Kind: kind, Detail: detail}
}
