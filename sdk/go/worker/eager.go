package worker

import (
	"sync"

	"github.com/wiggle-engine/wiggle/sdk/go/wigglepb"
)

// EagerSlot is a reserved slot for the first task of an instance this process starts itself
// (docs/worker-protocol.md, "Eager dispatch"): reserve, call StartInstance with
// Eager: w.EagerDispatch(), then Dispatch the returned eager_task, or Release when none came
// back. Exactly one of the two
// takes effect; the other is a no-op, so `defer slot.Release()` is always safe.
type EagerSlot interface {
	// Dispatch runs t on the reserved slot, as if PollTasks had returned it.
	Dispatch(t *wigglepb.Task)
	// Release gives the slot back unused.
	Release()
}

type eagerSlot struct {
	w    *worker
	once sync.Once
}

// ReserveEagerSlot takes a free slot for an eager task; nil when the worker is not running, is
// draining, or has no free slot. The caller then starts the instance without eager dispatch.
//
// The poll loop takes every free slot before each long poll (as the Python worker does), so a
// reservation succeeds only while tasks are running and the poll holds none: eager dispatch is
// best effort, and an idle worker usually answers nil.
func (w *worker) ReserveEagerSlot() EagerSlot {
	if !w.started.Load() || w.isDraining() {
		return nil
	}
	select {
	case w.slots <- struct{}{}:
	default:
		return nil
	}
	return &eagerSlot{w: w}
}

// EagerDispatch is what StartInstance's eager field carries for this worker.
func (w *worker) EagerDispatch() *wigglepb.EagerDispatch { return w.eagerDispatch() }

func (s *eagerSlot) Dispatch(t *wigglepb.Task) {
	s.once.Do(func() {
		if t == nil {
			s.w.giveSlots(1)
			return
		}
		// Race: Close may have begun since the reservation. The task is then given back
		// unrun (ReleaseTask): a drain costs no attempt.
		if s.w.isDraining() || !s.w.startTask(t, true) {
			s.w.log.Info("eager task released: the worker is closing", "task", t.GetTaskId())
			s.w.giveSlots(1)
			s.w.releaseAll([]*wigglepb.Task{t})
		}
	})
}

func (s *eagerSlot) Release() {
	s.once.Do(func() { s.w.giveSlots(1) })
}
