package worker

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// SDK names this worker to the server (PollTasksRequest.sdk).
const SDK = "wiggle-go/0.2.0"

// pollLoop takes free slots, long-polls for that many tasks, and starts each on its slot.
// Slots are taken before the call, so the server never leases this worker more tasks than it
// can start at once. It ends when the worker drains (Close): Close ends the open poll with
// EndPolls rather than cancelling it, so the server never claims a task for a call nobody reads;
// a task such a poll still brings back is released unrun (docs/worker-protocol.md, "Drain").
func (w *worker) pollLoop() {
	defer close(w.pollerDone)
	var b backoff
	for {
		select {
		case <-w.pollCtx.Done():
			return
		case <-w.draining:
			return
		case w.slots <- struct{}{}:
		}
		taken := 1 + w.takeFree()
		if w.isDraining() {
			w.giveSlots(taken)
			return
		}
		tasks, err := w.poll(taken)
		if w.isDraining() {
			w.giveSlots(taken)
			w.releaseAll(tasks)
			return
		}
		if err != nil {
			w.giveSlots(taken)
			if w.pollCtx.Err() != nil {
				return
			}
			if !retryable(err) {
				w.log.Error("PollTasks failed", "err", err)
			}
			sleep(w.pollCtx, b.next())
			continue
		}
		b.reset()
		if len(tasks) < taken {
			w.giveSlots(taken - len(tasks))
		}
		for i, t := range tasks {
			// More tasks than asked for is a server bug; run them anyway rather than let their
			// leases lapse. Those extra ones hold no slot.
			if !w.startTask(t, i < taken) && i < taken {
				w.giveSlots(1) // not reachable: polling stops before Close refuses tasks
			}
		}
	}
}

// releaseAll gives back tasks the worker will not run, each with reason shutdown.
func (w *worker) releaseAll(tasks []*wigglepb.Task) {
	for _, t := range tasks {
		w.release(w.abortCtx, t, newLease(t, nil), "shutdown")
	}
}

// takeFree takes every slot free right now without waiting; how many it took.
func (w *worker) takeFree() int {
	n := 0
	for {
		select {
		case w.slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
}

func (w *worker) giveSlots(n int) {
	for range n {
		<-w.slots
	}
}

func (w *worker) poll(maxTasks int) ([]*wigglepb.Task, error) {
	r := w.rpc.withTimeout(w.opts.PollWait + w.opts.CallTimeout) // held open up to PollWait
	resp, err := call(w.pollCtx, r, 0, w.rpc.client.PollTasks, &wigglepb.PollTasksRequest{
		WorkerId:   w.opts.WorkerID,
		Queues:     w.opts.Queues,
		MaxTasks:   int32(maxTasks),
		WaitMs:     int32(w.opts.PollWait.Milliseconds()),
		Activities: w.reg.names(),
		Slots:      int32(w.opts.Concurrency),
		Sdk:        SDK,
	})
	if err != nil {
		return nil, err
	}
	return resp.GetTasks(), nil
}

// endPolls stops the poll loop: the server ends this worker's open poll (EndPolls), which
// answers with whatever it holds. A server without EndPolls, or one that does not end the poll
// in time, gets the poll cancelled instead, as before.
func (w *worker) endPolls() {
	if !w.started.Load() {
		return
	}
	for range 3 {
		ctx, cancel := context.WithTimeout(w.abortCtx, w.opts.CallTimeout)
		_, err := call(ctx, w.rpc, 0, w.rpc.client.EndPolls, &wigglepb.EndPollsRequest{WorkerId: w.opts.WorkerID})
		cancel()
		if status.Code(err) == codes.Unimplemented {
			break
		}
		select {
		case <-w.pollerDone:
			return
		case <-time.After(time.Second): // a poll sent just as the drain began: end it too
		}
	}
	w.stopPoll()
	<-w.pollerDone
}

// startTask runs t on its own goroutine; false once Close has stopped accepting tasks.
func (w *worker) startTask(t *wigglepb.Task, holdsSlot bool) bool {
	// tasks.Add must not race Close's tasks.Wait (a WaitGroup rule): both happen under taskMu,
	// and after Close set noNewTasks nothing is added.
	w.taskMu.Lock()
	defer w.taskMu.Unlock()
	if w.noNewTasks {
		return false
	}
	w.tasks.Add(1)
	go func() {
		defer w.tasks.Done()
		if holdsSlot {
			defer w.giveSlots(1)
		}
		w.runTask(t)
	}()
	return true
}
