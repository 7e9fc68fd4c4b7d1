import { describe, expect, it } from 'vitest';
import { KeyedSerialQueue } from './keyed-serial.queue.js';

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe('KeyedSerialQueue', () => {
  it('runs one task at a time per key, in call order', async () => {
    const queue = new KeyedSerialQueue();
    const log: string[] = [];
    let running = 0;
    let maxRunning = 0;
    const task = (name: string) => async () => {
      running += 1;
      maxRunning = Math.max(maxRunning, running);
      log.push(`start ${name}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
      log.push(`end ${name}`);
      running -= 1;
      return name;
    };
    const results = await Promise.all(['a', 'b', 'c'].map((name) => queue.run('run_x', task(name))));
    expect(results).toEqual(['a', 'b', 'c']);
    expect(maxRunning).toBe(1);
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
  });

  it('runs different keys concurrently', async () => {
    const queue = new KeyedSerialQueue();
    const first = gate();
    const blocked = queue.run('run_a', async () => {
      await first.opened;
      return 'a';
    });
    // run_b finishes while run_a still waits; with one shared queue this would deadlock the test.
    await expect(queue.run('run_b', () => Promise.resolve('b'))).resolves.toBe('b');
    first.open();
    await expect(blocked).resolves.toBe('a');
  });

  it('goes on after a failed task and forgets idle keys', async () => {
    const queue = new KeyedSerialQueue();
    const failed = queue.run('run_a', () => Promise.reject(new Error('boom')));
    const next = queue.run('run_a', () => Promise.resolve('next'));
    await expect(failed).rejects.toThrow('boom');
    await expect(next).resolves.toBe('next');
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(queue.activeKeys).toBe(0);
  });
});
