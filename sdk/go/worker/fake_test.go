package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/graph"
	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// fakeServer is an in-memory stand-in for the generated client: it records every report and
// answers as a healthy server would. Methods the worker never calls panic (nil embedded).
type fakeServer struct {
	wigglepb.WiggleClient

	mu          sync.Mutex
	graphs      map[string][]byte // version -> canonical bytes
	queue       []*wigglepb.Task  // what PollTasks hands out
	advances    []*wigglepb.AdvanceRunRequest
	completes   []*wigglepb.CompleteTaskRequest
	fails       []*wigglepb.FailTaskRequest
	releases    []*wigglepb.ReleaseTaskRequest
	polls       []*wigglepb.PollTasksRequest
	beats       []*wigglepb.HeartbeatRequest
	heartbeats  int
	ended       chan struct{}                   // closed by EndPolls: open polls answer at once
	noEndPolls  bool                            // EndPolls answers UNIMPLEMENTED, as an older server does
	nextTask    *wigglepb.Task                  // CompleteTask with `next` hands this out once
	log         []string                        // every report, in the local-run vectors' notation
	beat        chan *wigglepb.HeartbeatRequest // when set, each heartbeat is sent here too
	completed   chan struct{}                   // when set, signalled at each CompleteTask
	loseAnswers int                             // the next AdvanceRuns are applied, then answered UNAVAILABLE
	onEnd       []*wigglepb.Task                // what a poll ended by EndPolls still brings back
	polled      chan struct{}                   // closed by the first PollTasks
	auth        []string
	advanceErr  error                   // AdvanceRun answers this error when set
	getDefErr   error                   // GetDefinition answers this error when set
	pollErrs    []error                 // PollTasks answers these errors first, one per call
	statusAfter wigglepb.InstanceStatus // AdvanceRun / Heartbeat status; 0 means RUNNING

	noReportBatch bool          // ReportBatch answers UNIMPLEMENTED, as an older server does
	batchSizes    []int         // the number of reports in each ReportBatch call
	viaBatch      int           // reports that came inside a ReportBatch
	holdBatch     chan struct{} // when set, the first ReportBatch waits until it is closed
}

func newFake() *fakeServer {
	return &fakeServer{graphs: map[string][]byte{}, ended: make(chan struct{}), polled: make(chan struct{})}
}

func (f *fakeServer) EndPolls(ctx context.Context, in *wigglepb.EndPollsRequest, _ ...grpc.CallOption) (*wigglepb.EndPollsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen(ctx)
	if f.noEndPolls {
		return nil, status.Error(codes.Unimplemented, "no EndPolls here")
	}
	select {
	case <-f.ended:
	default:
		close(f.ended)
	}
	return &wigglepb.EndPollsResponse{Ended: 1}, nil
}

func (f *fakeServer) ReleaseTask(ctx context.Context, in *wigglepb.ReleaseTaskRequest, _ ...grpc.CallOption) (*wigglepb.TaskReportResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen(ctx)
	f.releases = append(f.releases, in)
	return &wigglepb.TaskReportResponse{InstanceStatus: wigglepb.InstanceStatus_RUNNING}, nil
}

// ReportBatch answers each report as its own RPC would (those methods record it); an answer
// lost in transport (UNAVAILABLE) fails the whole call, as it would on the wire.
func (f *fakeServer) ReportBatch(ctx context.Context, in *wigglepb.ReportBatchRequest, _ ...grpc.CallOption) (*wigglepb.ReportBatchResponse, error) {
	f.mu.Lock()
	if f.noReportBatch {
		f.mu.Unlock()
		return nil, status.Error(codes.Unimplemented, "no ReportBatch here")
	}
	hold := f.holdBatch
	f.holdBatch = nil
	f.batchSizes = append(f.batchSizes, len(in.GetReports()))
	f.viaBatch += len(in.GetReports())
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	out := &wigglepb.ReportBatchResponse{}
	for _, r := range in.GetReports() {
		var a wigglepb.TaskReportAnswer
		var err error
		switch x := r.GetReport().(type) {
		case *wigglepb.TaskReport_Complete:
			var resp *wigglepb.TaskReportResponse
			resp, err = f.CompleteTask(ctx, x.Complete)
			a.Answer = &wigglepb.TaskReportAnswer_Task{Task: resp}
		case *wigglepb.TaskReport_Fail:
			var resp *wigglepb.TaskReportResponse
			resp, err = f.FailTask(ctx, x.Fail)
			a.Answer = &wigglepb.TaskReportAnswer_Task{Task: resp}
		case *wigglepb.TaskReport_Release:
			var resp *wigglepb.TaskReportResponse
			resp, err = f.ReleaseTask(ctx, x.Release)
			a.Answer = &wigglepb.TaskReportAnswer_Task{Task: resp}
		case *wigglepb.TaskReport_Advance:
			var resp *wigglepb.AdvanceRunResponse
			resp, err = f.AdvanceRun(ctx, x.Advance)
			a.Answer = &wigglepb.TaskReportAnswer_Advance{Advance: resp}
		}
		if status.Code(err) == codes.Unavailable {
			return nil, err
		}
		if err != nil {
			st := status.Convert(err)
			a.Answer = &wigglepb.TaskReportAnswer_Error{Error: &wigglepb.ReportError{
				StatusCode: int32(st.Code()), Message: st.Message()}}
		}
		out.Answers = append(out.Answers, &a)
	}
	return out, nil
}

func (f *fakeServer) seen(ctx context.Context) {
	md, _ := metadata.FromOutgoingContext(ctx)
	f.auth = append(f.auth, strings.Join(md.Get("authorization"), ","))
}

func (f *fakeServer) status() wigglepb.InstanceStatus {
	if f.statusAfter == 0 {
		return wigglepb.InstanceStatus_RUNNING
	}
	return f.statusAfter
}

func (f *fakeServer) GetDefinition(ctx context.Context, in *wigglepb.GetDefinitionRequest, _ ...grpc.CallOption) (*wigglepb.Definition, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen(ctx)
	if f.getDefErr != nil {
		return nil, f.getDefErr
	}
	g, ok := f.graphs[in.GetVersion()]
	if !ok {
		return nil, fmt.Errorf("no such version")
	}
	return &wigglepb.Definition{Name: in.GetName(), Version: in.GetVersion(), Graph: g}, nil
}

func (f *fakeServer) PollTasks(ctx context.Context, in *wigglepb.PollTasksRequest, _ ...grpc.CallOption) (*wigglepb.PollTasksResponse, error) {
	f.mu.Lock()
	if len(f.pollErrs) > 0 {
		err := f.pollErrs[0]
		f.pollErrs = f.pollErrs[1:]
		f.mu.Unlock()
		return nil, err
	}
	f.polls = append(f.polls, in)
	if len(f.polls) == 1 {
		close(f.polled)
	}
	f.mu.Unlock()
	for {
		f.mu.Lock()
		f.seen(ctx)
		if len(f.queue) > 0 {
			n := min(int(in.GetMaxTasks()), len(f.queue))
			out := f.queue[:n]
			f.queue = f.queue[n:]
			f.mu.Unlock()
			return &wigglepb.PollTasksResponse{Tasks: out}, nil
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.ended:
			f.mu.Lock()
			out := f.onEnd
			f.onEnd = nil
			f.mu.Unlock()
			return &wigglepb.PollTasksResponse{Tasks: out}, nil
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (f *fakeServer) CompleteTask(ctx context.Context, in *wigglepb.CompleteTaskRequest, _ ...grpc.CallOption) (*wigglepb.TaskReportResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen(ctx)
	f.completes = append(f.completes, in)
	f.log = append(f.log, "complete "+in.GetTaskId())
	if f.completed != nil {
		select {
		case f.completed <- struct{}{}:
		default:
		}
	}
	resp := &wigglepb.TaskReportResponse{InstanceStatus: wigglepb.InstanceStatus_RUNNING}
	if in.GetNext() != nil && f.nextTask != nil {
		resp.NextTask, f.nextTask = f.nextTask, nil
	}
	return resp, nil
}

func (f *fakeServer) FailTask(ctx context.Context, in *wigglepb.FailTaskRequest, _ ...grpc.CallOption) (*wigglepb.TaskReportResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen(ctx)
	f.fails = append(f.fails, in)
	f.log = append(f.log, "fail "+in.GetTaskId())
	return &wigglepb.TaskReportResponse{InstanceStatus: wigglepb.InstanceStatus_RUNNING}, nil
}

func (f *fakeServer) Heartbeat(ctx context.Context, in *wigglepb.HeartbeatRequest, _ ...grpc.CallOption) (*wigglepb.HeartbeatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen(ctx)
	f.heartbeats++
	f.beats = append(f.beats, in)
	if f.beat != nil {
		select {
		case f.beat <- in:
		default:
		}
	}
	return &wigglepb.HeartbeatResponse{
		LeaseExpiresAtMs: time.Now().Add(time.Minute).UnixMilli(),
		InstanceStatus:   f.status(),
	}, nil
}

func (f *fakeServer) AdvanceRun(ctx context.Context, in *wigglepb.AdvanceRunRequest, _ ...grpc.CallOption) (*wigglepb.AdvanceRunResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen(ctx)
	f.log = append(f.log, renderAdvance(in))
	if f.advanceErr != nil {
		return nil, f.advanceErr
	}
	f.advances = append(f.advances, in)
	if f.loseAnswers > 0 {
		f.loseAnswers--
		return nil, status.Error(codes.Unavailable, "the answer was lost")
	}
	st := f.status()
	return &wigglepb.AdvanceRunResponse{
		InstanceStatus:   st,
		LeaseExpiresAtMs: time.Now().Add(time.Minute).UnixMilli(),
		KeepGoing:        !in.GetFinal() && st == wigglepb.InstanceStatus_RUNNING,
	}, nil
}

// reports is every report so far in the notation of spec/conformance/localrun/README.md.
func (f *fakeServer) reports() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func renderAdvance(in *wigglepb.AdvanceRunRequest) string {
	parts := []string{"advance"}
	for _, s := range in.GetSteps() {
		switch o := s.GetOutcome().(type) {
		case *wigglepb.StepResult_Predicate:
			parts = append(parts, fmt.Sprintf("%s=%t", s.GetNodeId(), o.Predicate))
		case *wigglepb.StepResult_Failure:
			parts = append(parts, s.GetNodeId()+"!")
		default:
			parts = append(parts, s.GetNodeId())
		}
	}
	if in.GetFinal() {
		parts = append(parts, "/", in.GetHandbackReason())
	}
	return strings.Join(parts, " ")
}

// batches summarises the AdvanceRun calls as "a,b|c>end": node ids of each batch, "|" between
// batches, ">reason" on the final one.
func (f *fakeServer) batches() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	for _, a := range f.advances {
		var ids []string
		for _, s := range a.GetSteps() {
			id := s.GetNodeId()
			if s.GetFailure() != nil {
				id += "!"
			}
			ids = append(ids, id)
		}
		p := strings.Join(ids, ",")
		if a.GetFinal() {
			p += ">" + a.GetHandbackReason()
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "|")
}

// flow builds a canonical-looking graph from "id:kind:queue[:timeout_ms]" specs chained in
// order to "end". Kinds: task, cp (checkpoint task), filter (predicate, alt null), sleep.
func flow(t *testing.T, specs ...string) ([]byte, string) {
	t.Helper()
	nodes := map[string]any{"end": map[string]any{"kind": "end"}}
	retry := map[string]any{"max_attempts": 3, "backoff": "exponential", "initial_ms": 1000, "max_ms": 60000}
	for i, spec := range specs {
		p := strings.Split(spec, ":")
		next := "end"
		if i+1 < len(specs) {
			next = strings.Split(specs[i+1], ":")[0]
		}
		timeout := 60000
		if len(p) > 3 { // a fourth part is the step's timeout in milliseconds
			if _, err := fmt.Sscan(p[3], &timeout); err != nil {
				t.Fatalf("spec %q: %v", spec, err)
			}
		}
		n := map[string]any{"activity": p[0], "queue": p[2], "retry": retry, "timeout_ms": timeout, "next": next}
		switch p[1] {
		case "task", "cp":
			n["kind"], n["checkpoint"] = "task", p[1] == "cp"
		case "filter":
			n["kind"], n["alt"], n["max_iterations"] = "predicate", nil, nil
		case "sleep":
			n = map[string]any{"kind": "sleep", "duration_ms": 10, "until": nil, "next": next}
		}
		nodes[p[0]] = n
	}
	doc, err := json.Marshal(map[string]any{"format": 1, "name": "f", "execution": "DEFAULT",
		"input": nil, "start": strings.Split(specs[0], ":")[0], "nodes": nodes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := graph.Parse(doc); err != nil {
		t.Fatalf("test graph does not parse: %v", err)
	}
	return doc, graph.VersionOf(doc)
}

// testWorker is a worker on fake with appending handlers for every name given.
func testWorker(f *fakeServer, opts Options, appenders ...string) *worker {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w := New(f, opts).(*worker)
	for _, name := range appenders {
		w.Register(name, appendNode)
	}
	return w
}

// appendNode is the conformance "append": ctx with trail = trail + [node].
func appendNode(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
	info, _ := Step(ctx)
	var c map[string]any
	if err := json.Unmarshal(in, &c); err != nil || c == nil {
		c = map[string]any{}
	}
	trail, _ := c["trail"].([]any)
	c["trail"] = append(trail, info.NodeID)
	return json.Marshal(c)
}

func task(version, node string, mode wigglepb.ExecutionMode) *wigglepb.Task {
	return &wigglepb.Task{
		TaskId: "t-" + node, Lease: "l1", LeaseExpiresAtMs: time.Now().Add(time.Minute).UnixMilli(),
		InstanceId: "i1", Flow: "f", Version: version, NodeId: node, Activity: node, Queue: "default",
		Attempt: 1, Input: []byte(`{}`), ExecutionMode: mode, TimeoutMs: 60000,
	}
}
