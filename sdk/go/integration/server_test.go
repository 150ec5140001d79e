package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// repoRoot is the repository, three levels up from this package.
const repoRoot = "../../.."

const token = "go-integration-token"

func python() string {
	if p := os.Getenv("PYTHON"); p != "" {
		return p
	}
	return "python3"
}

// server is a running `wiggle server` subprocess and a connection to it.
type server struct {
	address string
	conn    *grpc.ClientConn
	client  wigglepb.WiggleClient
}

// startServer runs the Python server on a free port over a fresh SQLite file, for this test
// only. It fails when the wiggle package (or its server) cannot be imported: set up first.
func startServer(t *testing.T) *server {
	t.Helper()
	probe := exec.Command(python(), "-c", "import wiggle.server")
	probe.Dir = repoRoot
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("the Python server is not importable (run scripts/setup.sh first) (%v): %s", err, out)
	}
	address := freeAddress(t)
	dir := t.TempDir()
	var log bytes.Buffer
	cmd := exec.Command(python(), "-m", "wiggle", "server", "--address", address,
		"--database", "sqlite:///"+filepath.Join(dir, "w.db"), "--token", token)
	cmd.Dir = repoRoot
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.Env = append(os.Environ(), "WIGGLE_EXECUTION_MODE=SERVER")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("server log:\n%s", log.String())
		}
	})
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	health := grpc_health_v1.NewHealthClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := health.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == grpc_health_v1.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server at %s not serving after 30 s (last error %v); log:\n%s", address, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &server{address: address, conn: conn, client: wigglepb.NewWiggleClient(conn)}
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// deploy writes each flow to a file and registers them all with `wiggle deploy`.
func (s *server) deploy(t *testing.T, flows map[string]string) {
	t.Helper()
	dir := t.TempDir()
	args := []string{"-m", "wiggle", "deploy", "--address", s.address, "--token", token}
	for name, text := range flows {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, path)
	}
	cmd := exec.Command(python(), args...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("wiggle deploy: %v\n%s", err, out)
	}
}

// authed is ctx carrying the bearer token, for calls the test makes itself.
func authed(ctx context.Context) context.Context {
	return metadataWithToken(ctx)
}

// wait polls DescribeInstance until the instance leaves RUNNING.
func (s *server) wait(t *testing.T, id string, within time.Duration) *wigglepb.Instance {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(authed(context.Background()), 5*time.Second)
		inst, err := s.client.DescribeInstance(ctx, &wigglepb.DescribeInstanceRequest{InstanceId: id, IncludeEvents: true})
		cancel()
		if err != nil {
			t.Fatalf("DescribeInstance %s: %v", id, err)
		}
		if inst.GetStatus() != wigglepb.InstanceStatus_RUNNING {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s still RUNNING after %s", id, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func eventSummary(inst *wigglepb.Instance) string {
	var parts []string
	for _, e := range inst.GetEvents() {
		parts = append(parts, fmt.Sprintf("%s:%s %s", e.GetKind(), e.GetNodeId(), e.GetDetail()))
	}
	return strings.Join(parts, "\n")
}
