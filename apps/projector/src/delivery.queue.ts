/**
 * Hands delivered messages from the reader to the writer loop: `take` returns whatever is
 * queued (up to a batch), waiting while nothing is — and, with a linger, up to that long more
 * for a fuller batch; after `close`, the rest drains at once.
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

  /**
   * Up to `max` items, oldest first; an empty array only once closed and drained. With
   * `lingerMs`, once the first item is there it waits up to that long (less when `max` are
   * queued first, or the queue closes) for more to join it.
   */
  async take(max: number, lingerMs = 0): Promise<T[]> {
    while (this.items.length === 0 && !this.closed) {
      await new Promise<void>((resolve) => (this.waiting = resolve));
    }
    if (lingerMs > 0 && this.items.length < max && !this.closed) {
      const until = Date.now() + lingerMs;
      while (this.items.length < max && !this.closed && Date.now() < until) {
        let timer: NodeJS.Timeout | undefined;
        await new Promise<void>((resolve) => {
          this.waiting = resolve;
          timer = setTimeout(resolve, Math.max(0, until - Date.now()));
        });
        clearTimeout(timer);
      }
    }
    return this.items.splice(0, max);
  }

  private release(): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.();
  }
}
