package expr

import (
	"testing"
	"time"
)

// SetTimeLimit makes Evaluate enforce d instead of TimeLimit until t ends. The tests whose
// evaluations must end within the limit run under a minute: the limit is wall-clock time, which
// a loaded machine stretches many times over, while an evaluation that is not linear takes
// minutes on the vectors that check it and still fails. Not safe with t.Parallel.
func SetTimeLimit(t testing.TB, d time.Duration) {
	t.Helper()
	was := timeLimit
	timeLimit = d
	t.Cleanup(func() { timeLimit = was })
}

// RoomyTimeLimit is the limit of the tests that are not about it.
const RoomyTimeLimit = time.Minute
