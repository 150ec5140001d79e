// Command wiggle-conformance-worker serves the conformance activities (spec/conformance/
// ACTIVITIES.md) with the Go worker, so `wiggle conformance --worker CMD` can run the corpus
// against it.
//
// Environment: WIGGLE_ADDRESS (host:port, required here), the other connection variables of
// docs/worker-protocol.md ("Connection") read by worker.Connection.WithEnv, WIGGLE_QUEUES
// (comma-separated, default "default,other"), WIGGLE_CONCURRENCY (default 64),
// WIGGLE_CONFORMANCE_BATCH_SIZE (the LOCAL_ASYNC batch size, default the SDK's),
// WIGGLE_CONFORMANCE_TRACE (the trace file the activities append to).
//
// SIGTERM or SIGINT drains (running steps finish, buffered runs are handed back) and exits 0; a
// second signal stops at once, like a crash for whatever is still held.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/wiggle-engine/wiggle/sdk/go/conformance"
	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
	"github.com/wiggle-engine/wiggle/sdk/go/worker"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "wiggle-conformance-worker:", err)
		os.Exit(1)
	}
}

func run() error {
	if os.Getenv("WIGGLE_ADDRESS") == "" {
		return fmt.Errorf("set WIGGLE_ADDRESS to the server's host:port")
	}
	server, err := worker.Connection{}.WithEnv()
	if err != nil {
		return err
	}
	token, err := server.BearerToken()
	if err != nil {
		return err
	}
	queues := []string{"default", "other"}
	if q := os.Getenv("WIGGLE_QUEUES"); q != "" {
		queues = strings.Split(q, ",")
	}
	concurrency, err := positive("WIGGLE_CONCURRENCY", 64)
	if err != nil {
		return err
	}
	batch, err := positive("WIGGLE_CONFORMANCE_BATCH_SIZE", 0)
	if err != nil {
		return err
	}
	conn, err := server.Dial()
	if err != nil {
		return err
	}
	defer conn.Close()

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	w := worker.New(wigglepb.NewWiggleClient(conn), worker.Options{
		Queues:         queues,
		Concurrency:    concurrency,
		LocalBatchSize: batch,
		Token:          token,
		Logger:         log,
	})
	conformance.Register(w)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	serve, stop := context.WithCancel(context.Background())
	drain, abort := context.WithCancel(context.Background())
	go func() {
		<-sigs
		log.Info("signal: draining")
		stop()
		<-sigs
		log.Info("second signal: stopping without draining")
		abort()
	}()
	if err := w.Start(); err != nil {
		return err
	}
	<-serve.Done()
	if err := w.Close(drain); err != nil {
		return fmt.Errorf("drain cut short: %w", err)
	}
	return nil
}

// positive reads an optional positive integer from the environment (fallback when unset).
func positive(name string, fallback int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return fallback, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive integer", name, v)
	}
	return n, nil
}
