/**
 * Hands delivered messages from the reader to the writer loop: `take` returns whatever is
 * queued (up to a batch), waiting only while nothing is; after `close`, the rest drains.
 */
export class DeliveryQueue<T> {
  private items: T[] = [];
  private waiting: (() => void) | null = null;
  private closed = false;

  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    this.items.push(item);
    this.release();
  }

  close(): void {
    this.closed = true;
    this.release();
  }

  /** Up to `max` items, oldest first; an empty array only once closed and drained. */
  async take(max: number): Promise<T[]> {
    while (this.items.length === 0 && !this.closed) {
      await new Promise<void>((resolve) => (this.waiting = resolve));
    }
    return this.items.splice(0, max);
  }

  private release(): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.();
  }
}
