package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/wiggle-engine/wiggle/sdk/go/conformance"
	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
	"github.com/wiggle-engine/wiggle/sdk/go/worker"
)

func metadataWithToken(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// A flow that crosses every kind of handback a local run meets: a retry, a checkpoint, a queue
// change, a fork and join, a filter.
const mainFlow = `wiggle: 1
name: go-it-%[1]s
execution: %[2]s
steps:
  - {task: append, id: a}
  - {task: inc}
  - {filter: is_true, id: go}
  - {task: fail_times, id: flaky, retry: {max_attempts: 3, backoff: fixed, initial: 10ms}}
  - {task: append, id: b, checkpoint: true}
  - {task: append, id: c, queue: other}
  - parallel:
      left: [{task: append, id: l}]
      right: [{task: inc_m}]
    combine: merge_results
  - {task: append, id: d}
`

const fatalFlow = `wiggle: 1
name: go-it-fatal-%[1]s
execution: %[2]s
steps:
  - {task: append, id: a}
  - {task: fail_fatal, id: x}
`

var modes = []string{"SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"}

func slug(mode string) string { return strings.ToLower(strings.ReplaceAll(mode, "_", "-")) }

// TestGoWorkerCompletesInstancesInEveryMode deploys the flows with the Python CLI, starts
// instances, and has only the Go worker run them.
func TestGoWorkerCompletesInstancesInEveryMode(t *testing.T) {
	s := startServer(t)
	flows := map[string]string{}
	for _, m := range modes {
		flows["main-"+slug(m)] = fmt.Sprintf(mainFlow, slug(m), m)
		flows["fatal-"+slug(m)] = fmt.Sprintf(fatalFlow, slug(m), m)
	}
	s.deploy(t, flows)

	w := worker.New(s.client, worker.Options{
		Queues:   []string{"default", "other"},
		Token:    token,
		PollWait: time.Second,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	conformance.Register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})

	for _, m := range modes {
		t.Run(m, func(t *testing.T) {
			done := s.start(t, "go-it-"+slug(m), `{"go": true, "fail_times": {"flaky": 1}}`)
			filtered := s.start(t, "go-it-"+slug(m), `{"go": false}`)
			fatal := s.start(t, "go-it-fatal-"+slug(m), `{}`)

			inst := s.wait(t, done, 30*time.Second)
			if inst.GetStatus() != wigglepb.InstanceStatus_COMPLETED {
				t.Fatalf("status %s (%s); events:\n%s", inst.GetStatus(), inst.GetReason(), eventSummary(inst))
			}
			if got := inst.GetExecutionMode().String(); got != m {
				t.Errorf("instance ran in %s", got)
			}
			var ctx struct {
				Trail   []string `json:"trail"`
				N       int      `json:"n"`
				Results struct {
					Left  struct{ Trail []string } `json:"left"`
					Right struct{ M int }          `json:"right"`
				} `json:"results"`
			}
			if err := json.Unmarshal(inst.GetContext(), &ctx); err != nil {
				t.Fatalf("context %s: %v", inst.GetContext(), err)
			}
			if want := []string{"a", "flaky", "b", "c", "d"}; !reflect.DeepEqual(ctx.Trail, want) {
				t.Errorf("trail %v, want %v (context %s)", ctx.Trail, want, inst.GetContext())
			}
			if ctx.N != 1 || ctx.Results.Right.M != 1 ||
				!reflect.DeepEqual(ctx.Results.Left.Trail, []string{"a", "flaky", "b", "c", "l"}) {
				t.Errorf("context %s", inst.GetContext())
			}
			handbacks := strings.Count(eventSummary(inst), "handed_back:")
			if m == "SERVER" && handbacks != 0 || m != "SERVER" && handbacks == 0 {
				t.Errorf("%d handed_back events in %s mode; events:\n%s", handbacks, m, eventSummary(inst))
			}

			if inst := s.wait(t, filtered, 30*time.Second); inst.GetStatus() != wigglepb.InstanceStatus_COMPLETED ||
				!strings.Contains(inst.GetReason(), "filtered") {
				t.Errorf("filtered instance: %s (%s)", inst.GetStatus(), inst.GetReason())
			}
			if inst := s.wait(t, fatal, 30*time.Second); inst.GetStatus() != wigglepb.InstanceStatus_FAILED ||
				!strings.Contains(inst.GetReason(), "fatal x") {
				t.Errorf("fatal instance: %s (%s)", inst.GetStatus(), inst.GetReason())
			}
		})
	}
}

func (s *server) start(t *testing.T, flow, input string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(authed(context.Background()), 10*time.Second)
	defer cancel()
	resp, err := s.client.StartInstance(ctx, &wigglepb.StartInstanceRequest{Flow: flow, Input: []byte(input)})
	if err != nil {
		t.Fatalf("StartInstance %s: %v", flow, err)
	}
	return resp.GetInstanceId()
}
