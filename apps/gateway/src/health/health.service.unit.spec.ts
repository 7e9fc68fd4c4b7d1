import { describe, expect, it } from 'vitest';
import { servicePulling } from './health.service.js';

describe('servicePulling', () => {
  it('needs a consumer named for the service with a pull waiting', () => {
    expect(servicePulling('policy', [{ name: 'cairn-policy', num_waiting: 1 }])).toBe(true);
    expect(servicePulling('policy', [{ name: 'cairn-policy', num_waiting: 0 }])).toBe(false);
    expect(servicePulling('intake', [{ name: 'cairn-intake-submit', num_waiting: 2 }])).toBe(true);
    expect(servicePulling('runtime', [{ name: 'cairn-runtime-w1', num_waiting: 1 }])).toBe(true);
    expect(servicePulling('policy', [{ name: 'cairn-policyx', num_waiting: 1 }])).toBe(false);
    expect(servicePulling('grader', [])).toBe(false);
  });
});
