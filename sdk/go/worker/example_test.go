package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
	"github.com/wiggle-engine/wiggle/sdk/go/worker"
)

// A worker serving the "orders" queue with one task and one predicate, until SIGTERM.
func Example() {
	server, err := worker.Connection{}.WithEnv() // WIGGLE_ADDRESS, WIGGLE_AUTH_TOKEN, WIGGLE_TLS...
	if err != nil {
		log.Fatal(err)
	}
	token, err := server.BearerToken()
	if err != nil {
		log.Fatal(err)
	}
	conn, err := server.Dial()
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	w := worker.New(wigglepb.NewWiggleClient(conn), worker.Options{
		Queues: []string{"orders"},
		Token:  token,
	})
	w.Register("validate", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		var order map[string]any
		if err := json.Unmarshal(in, &order); err != nil {
			return nil, worker.NonRetryable(errors.New("an order must be a JSON object"))
		}
		step, _ := worker.Step(ctx)
		order["validated_by"] = step.InstanceID + "/" + step.NodeID // an idempotency key
		return json.Marshal(order)
	})
	w.RegisterPredicate("in_stock", func(ctx context.Context, in json.RawMessage) (bool, error) {
		var order struct{ Qty int }
		err := json.Unmarshal(in, &order)
		return order.Qty <= 10, err
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil { // serves until SIGTERM, then drains
		log.Fatal(err)
	}
}
