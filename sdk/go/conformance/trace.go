package conformance

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/wiggle-engine/wiggle/sdk/go/worker"
)

// TraceEnv names the file every conformance invocation appends one line to.
const TraceEnv = "WIGGLE_CONFORMANCE_TRACE"

var (
	traceMu   sync.Mutex
	traceFile *os.File
	tracePath string
)

// trace appends {"instance_id","flow","node_id","activity","attempt"} to the trace file, in
// one unbuffered write on a file opened O_APPEND: concurrent invocations never interleave and a
// worker killed right after leaves the whole line behind. The runner counts executions from it.
func trace(ctx context.Context, activity string) {
	path := os.Getenv(TraceEnv)
	if path == "" {
		return
	}
	info, _ := worker.Step(ctx)
	line := fmt.Sprintf(`{"instance_id":%s,"flow":%s,"node_id":%s,"activity":%s,"attempt":%d}`+"\n",
		jsonString(info.InstanceID), jsonString(info.Flow), jsonString(info.NodeID),
		jsonString(activity), info.Attempt)
	traceMu.Lock()
	defer traceMu.Unlock()
	if traceFile == nil || tracePath != path {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return // no trace is a runner problem, not a reason to fail the step
		}
		if traceFile != nil {
			traceFile.Close()
		}
		traceFile, tracePath = f, path
	}
	_, _ = traceFile.Write([]byte(line))
}
