/** Runs tasks one at a time, in call order: placements read capacity and write a lease as one step. */
export class SerialGate {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task, task);
    this.tail = result.catch(() => undefined);
    return result;
  }
}
