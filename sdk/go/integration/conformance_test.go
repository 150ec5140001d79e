package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestConformanceCorpus runs `wiggle conformance` (the Python runner, every mode) with the Go
// conformance worker. By default it runs every case but the crash ones, which take over a
// minute; WIGGLE_GO_CONFORMANCE=full runs the whole corpus, WIGGLE_GO_CONFORMANCE=off none.
func TestConformanceCorpus(t *testing.T) {
	which := os.Getenv("WIGGLE_GO_CONFORMANCE")
	if which == "off" {
		t.Skip("WIGGLE_GO_CONFORMANCE=off")
	}
	probe := exec.Command(python(), "-c", "import wiggle.conformance")
	probe.Dir = repoRoot
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("the conformance runner is not importable (run scripts/setup.sh first) (%v): %s", err, out)
	}
	bin := filepath.Join(t.TempDir(), "wiggle-conformance-worker")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/wiggle-conformance-worker").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	globs := []string{"[!c]*/*", "c[!r]*/*"} // everything but crash/*
	if which == "full" {
		globs = []string{"*"}
	}
	for _, glob := range globs {
		cmd := exec.Command(python(), "-m", "wiggle", "conformance", "--worker", bin, "--cases", glob)
		// An empty directory: the runner also reads --cases as a path glob, which must not
		// match any file around it.
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		summary := lines[len(lines)-1]
		if err != nil || !strings.HasSuffix(summary, " 0 failed") {
			t.Errorf("wiggle conformance --cases %q: %v\n%s", glob, err, out)
			continue
		}
		t.Logf("--cases %q: %s", glob, summary)
	}
}
