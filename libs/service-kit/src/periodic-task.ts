/**
 * Runs `pass` every `intervalMs`, one pass at a time: the next is timed from the end of the last,
 * so a slow pass never overlaps the next. A pass that fails is reported to `onError` and the task
 * goes on. `stop` cancels what is not started and waits for the pass under way (a service stops
 * its scans before its connections drain).
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private halted = false;

  constructor(
    private readonly intervalMs: number,
    private readonly pass: () => Promise<unknown>,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** True once `stop` was called: a long pass checks it between items and stops early. */
  get stopped(): boolean {
    return this.halted;
  }

  start(): void {
    this.schedule();
  }

  async stop(): Promise<void> {
    this.halted = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(): void {
    if (this.halted) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.running = this.pass()
        .then(() => undefined)
        .catch((error: unknown) => this.onError(error))
        .finally(() => {
          this.running = null;
          this.schedule();
        });
    }, this.intervalMs);
  }
}
