import { describe, expect, it, vi } from 'vitest';
import { DeliveryQueue } from './delivery.queue.js';

describe('DeliveryQueue', () => {
  it('hands over what is queued, at most a batch at a time, oldest first', async () => {
    const queue = new DeliveryQueue<number>();
    for (let i = 1; i <= 5; i++) queue.push(i);
    expect(await queue.take(3)).toEqual([1, 2, 3]);
    expect(await queue.take(3)).toEqual([4, 5]);
  });

  it('waits while empty and wakes on the next push', async () => {
    const queue = new DeliveryQueue<string>();
    const taken = queue.take(10);
    queue.push('a');
    queue.push('b'); // arrives before the waiting take resumes: the same batch
    expect(await taken).toEqual(['a', 'b']);
    const next = queue.take(10);
    queue.push('c');
    expect(await next).toEqual(['c']);
  });

  it('drains after close, then returns nothing', async () => {
    const queue = new DeliveryQueue<number>();
    queue.push(1);
    queue.close();
    expect(await queue.take(10)).toEqual([1]);
    expect(await queue.take(10)).toEqual([]);
    const waiting = new DeliveryQueue<number>();
    const pending = waiting.take(1);
    waiting.close();
    expect(await pending).toEqual([]);
  });

  it('with a linger, lets what arrives within it join the first item, and no longer', async () => {
    vi.useFakeTimers();
    try {
      const queue = new DeliveryQueue<number>();
      queue.push(1);
      let taken: number[] | null = null;
      void queue.take(10, 60).then((items) => (taken = items));
      await vi.advanceTimersByTimeAsync(10);
      queue.push(2);
      await vi.advanceTimersByTimeAsync(15);
      queue.push(3);
      await vi.advanceTimersByTimeAsync(30); // 55 ms in: still lingering
      expect(taken).toBeNull();
      await vi.advanceTimersByTimeAsync(5);
      expect(taken).toEqual([1, 2, 3]);
      queue.push(4);
      expect(await queue.take(10)).toEqual([4]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('ends a linger as soon as a full batch is queued, or the queue closes', async () => {
    const full = new DeliveryQueue<number>();
    full.push(1);
    const batch = full.take(3, 10_000);
    full.push(2);
    full.push(3);
    expect(await batch).toEqual([1, 2, 3]);
    const closing = new DeliveryQueue<number>();
    closing.push(1);
    const rest = closing.take(3, 10_000);
    closing.close();
    expect(await rest).toEqual([1]);
  });
});
