package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

const drainFlow = `wiggle: 1
name: go-it-drain
execution: LOCAL_ASYNC
steps:
  - {task: append, id: a}
  - {task: hold, id: b}
  - {task: append, id: c}
  - {task: append, id: d}
`

// TestConformanceBinaryDrainsOnSIGTERM runs the built wiggle-conformance-worker, sends it
// SIGTERM while a LOCAL_ASYNC run is in its second step, and checks that the process exits 0
// after handing back the two buffered results, so that a second worker finishes the instance
// without running a or b again.
func TestConformanceBinaryDrainsOnSIGTERM(t *testing.T) {
	s := startServer(t)
	s.deploy(t, map[string]string{"drain": drainFlow})
	dir := t.TempDir()
	bin := filepath.Join(dir, "wiggle-conformance-worker")
	build := exec.Command("go", "build", "-o", bin, "../cmd/wiggle-conformance-worker")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tracePath := filepath.Join(dir, "trace.jsonl")
	run := func() *exec.Cmd {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "WIGGLE_ADDRESS="+s.address, "WIGGLE_AUTH_TOKEN="+token,
			"WIGGLE_CONFORMANCE_TRACE="+tracePath)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	first := run()
	id := s.start(t, "go-it-drain", `{"hold_ms": 1000}`)
	waitFor(t, func() bool { return strings.Contains(readFile(tracePath), `"node_id":"b"`) })
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("the worker did not exit cleanly on SIGTERM: %v", err)
	}
	inst := describe(t, s, id)
	if inst.GetStatus() != wigglepb.InstanceStatus_RUNNING {
		t.Fatalf("status %s after the drain; a second worker should finish it", inst.GetStatus())
	}
	if ev := eventSummary(inst); !strings.Contains(ev, "shutdown") {
		t.Errorf("no handback with reason shutdown; events:\n%s", ev)
	}

	second := run()
	defer func() {
		_ = second.Process.Signal(syscall.SIGTERM)
		_ = second.Wait()
	}()
	inst = s.wait(t, id, 30*time.Second)
	var ctx struct{ Trail []string }
	_ = json.Unmarshal(inst.GetContext(), &ctx)
	if inst.GetStatus() != wigglepb.InstanceStatus_COMPLETED || !reflect.DeepEqual(ctx.Trail, []string{"a", "b", "c", "d"}) {
		t.Fatalf("status %s context %s", inst.GetStatus(), inst.GetContext())
	}
	trace := readFile(tracePath)
	for _, n := range []string{"a", "b", "c", "d"} {
		if got := strings.Count(trace, `"node_id":"`+n+`"`); got != 1 {
			t.Errorf("step %s ran %d times; trace:\n%s", n, got, trace)
		}
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func describe(t *testing.T, s *server, id string) *wigglepb.Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(authed(context.Background()), 5*time.Second)
	defer cancel()
	inst, err := s.client.DescribeInstance(ctx, &wigglepb.DescribeInstanceRequest{InstanceId: id, IncludeEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}
