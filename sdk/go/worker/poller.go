package worker

import (
	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// pollLoop takes free slots, long-polls for that many tasks, and starts each on its slot.
// Slots are taken before the call, so the server never leases this worker more tasks than it
// can start at once. It ends when polling stops (Close).
//
// Race: the server may claim tasks for a poll that Close cancels before its answer arrives.
// Those leases expire and the tasks are redelivered; nothing is lost, only delayed.
func (w *worker) pollLoop() {
	defer close(w.pollerDone)
	var b backoff
	for {
		select {
		case <-w.pollCtx.Done():
			return
		case w.slots <- struct{}{}:
		}
		taken := 1 + w.takeFree()
		tasks, err := w.poll(taken)
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
		WorkerId: w.opts.WorkerID,
		Queues:   w.opts.Queues,
		MaxTasks: int32(maxTasks),
		WaitMs:   int32(w.opts.PollWait.Milliseconds()),
	})
	if err != nil {
		return nil, err
	}
	return resp.GetTasks(), nil
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
