/**
 * Runs a job on demand without ever overlapping two runs: triggers that arrive while a
 * run is in progress (a learner saving three times in a second) are merged into one
 * follow-up run after it. Used by `idem-lab watch`.
 */

/** What the job is told about the triggers it serves. */
export interface Batch {
  /** Every reason given since the last run began, each once, in the order first given. */
  reasons: string[];
}

/**
 * Debounces and serialises a job. `trigger(reason)` asks for a run; the job starts
 * `debounceMs` after the last trigger, never while a run is in progress, and the
 * triggers that came during a run produce exactly one more run. Errors the job throws
 * go to `onError` and do not stop later runs.
 */
export class Coalescer {
  private running: Promise<void> | undefined;
  private pending: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  /**
   * @param job the work; awaited before the next run starts
   * @param debounceMs quiet time after the last trigger before a run starts, in ms
   * @param onError receives what the job threw
   */
  constructor(
    private readonly job: (batch: Batch) => Promise<void>,
    private readonly debounceMs = 150,
    private readonly onError: (err: unknown) => void = () => {},
  ) {}

  /** Asks for a run, for the given reason (e.g. the file saved). */
  trigger(reason: string): void {
    if (this.closed) return;
    if (!this.pending.includes(reason)) this.pending.push(reason);
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.drain();
    }, this.debounceMs);
  }

  /** Whether a run is in progress. */
  get busy(): boolean {
    return this.running !== undefined;
  }

  /** Resolves when no run is in progress and none is waiting (at most after the current ones). */
  async idle(): Promise<void> {
    while (this.running || this.timer) {
      if (this.running) await this.running;
      else await new Promise((resolve) => setTimeout(resolve, this.debounceMs));
    }
  }

  /** Ignores later triggers and drops a waiting one; a run in progress finishes (await `idle()`). */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = [];
  }

  private async drain(): Promise<void> {
    if (this.running) return; // the loop below picks the new triggers up when the run ends
    let done!: () => void;
    this.running = new Promise<void>((resolve) => (done = resolve));
    try {
      // A trigger whose quiet time has not passed yet is left to its own timer.
      while (this.pending.length > 0 && !this.closed && !this.timer) {
        const reasons = this.pending;
        this.pending = [];
        try {
          await this.job({ reasons });
        } catch (err) {
          this.onError(err);
        }
      }
    } finally {
      this.running = undefined;
      done();
    }
  }
}
