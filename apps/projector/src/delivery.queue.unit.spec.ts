import { describe, expect, it } from 'vitest';
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
});
