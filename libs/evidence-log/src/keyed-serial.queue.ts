/**
 * Runs tasks one at a time per key, in call order; different keys run concurrently. Appends to
 * one chain inside one process then never race each other for the same compare-and-set.
 */
export class KeyedSerialQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  get activeKeys(): number {
    return this.tails.size;
  }

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key);
    const result = previous === undefined ? task() : previous.then(task);
    // The tail never rejects, so the next task starts whatever this one did.
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}
