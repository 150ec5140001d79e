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

// CurrentTimeLimit is the limit Evaluate enforces now.
func CurrentTimeLimit() time.Duration { return timeLimit }

// RoomyTimeLimit is the limit of the tests that are not about it.
const RoomyTimeLimit = time.Minute

// BriefTimeLimit is the limit the vectors that must reach a limit run under: what they check is
// that an evaluation of ten seconds or more is stopped with the limit's error, which a tenth of
// a second shows as well as the profile's second does, in a tenth of the CPU. TestTimeLimit
// checks the profile's own.
const BriefTimeLimit = 100 * time.Millisecond
