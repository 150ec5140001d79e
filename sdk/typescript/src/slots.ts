/** The worker's concurrency: one slot per task or local run in flight. */

/** A counting semaphore of slots: one per task or local run in flight. */
export class Slots {
  private readonly waiters: (() => void)[] = [];
  constructor(private free: number) {}

  /** Takes one slot, waiting for it; false when `signal` aborted first. */
  take(signal: AbortSignal): Promise<boolean> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const onAbort = (): void => {
        const i = this.waiters.indexOf(wake);
        if (i >= 0) {
          this.waiters.splice(i, 1);
        }
        resolve(false);
      };
      const wake = (): void => {
        signal.removeEventListener("abort", onAbort);
        resolve(true);
      };
      this.waiters.push(wake);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Takes one slot if one is free now, without waiting. */
  tryTake(): boolean {
    if (this.free > 0) {
      this.free--;
      return true;
    }
    return false;
  }

  /**
   * Takes one slot even when none is free (the count goes below zero until it is given back):
   * an eager start borrows from an open poll, which then starts at most one task more than
   * the concurrency rather than let a leased task wait for its lease to lapse.
   */
  takeOver(): void {
    this.free--;
  }

  /** Takes every slot free now; how many. */
  takeFree(): number {
    const n = this.free;
    this.free = 0;
    return n;
  }

  give(n: number): void {
    for (let i = 0; i < n; i++) {
      const wake = this.waiters.shift();
      if (wake !== undefined) {
        wake(); // handed straight to a waiter
      } else {
        this.free++;
      }
    }
  }
}
