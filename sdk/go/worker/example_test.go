package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
	"github.com/wiggle-engine/wiggle/sdk/go/worker"
)

// A worker serving the "orders" queue with one task and one predicate, until SIGTERM.
func Example() {
	conn, err := grpc.NewClient("127.0.0.1:7233", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	w := worker.New(wigglepb.NewWiggleClient(conn), worker.Options{
		Queues: []string{"orders"},
		Token:  os.Getenv("WIGGLE_AUTH_TOKEN"),
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
