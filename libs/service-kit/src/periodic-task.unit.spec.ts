import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { PeriodicTask } from './periodic-task.js';

describe('PeriodicTask', () => {
  it('runs passes one at a time, goes on after a failing one, and stop waits for the pass under way', async () => {
    let running = 0;
    let overlapped = false;
    let passes = 0;
    const errors: unknown[] = [];
    let finishedAfterStop = false;
    const task = new PeriodicTask(
      5,
      async () => {
        running += 1;
        overlapped ||= running > 1;
        passes += 1;
        await sleep(20);
        running -= 1;
        if (passes === 1) throw new Error('first pass fails');
        if (task.stopped) finishedAfterStop = true;
      },
      (error) => errors.push(error),
    );
    task.start();
    while (passes < 3) await sleep(5);
    await task.stop();
    const after = passes;
    await sleep(50);
    expect(overlapped).toBe(false);
    expect(errors).toHaveLength(1);
    expect(finishedAfterStop).toBe(true);
    expect(passes).toBe(after);
    expect(task.stopped).toBe(true);
  });

  it('stopped before its first pass runs none', async () => {
    let passes = 0;
    const task = new PeriodicTask(
      5,
      () => {
        passes += 1;
        return Promise.resolve();
      },
      () => undefined,
    );
    task.start();
    await task.stop();
    await sleep(30);
    expect(passes).toBe(0);
  });
});
