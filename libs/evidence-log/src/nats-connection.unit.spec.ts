import { describe, expect, it } from 'vitest';
import { MIN_NATS_SERVER_VERSION, parseServerVersion, serverVersionProblem } from './nats-connection.js';

describe('serverVersionProblem', () => {
  it('accepts the minimum and anything newer', () => {
    for (const version of [MIN_NATS_SERVER_VERSION, '2.12.1', '2.15.2', 'v2.14.5', '2.13.0-RC.1', '3.0.0']) {
      expect(serverVersionProblem(version), version).toBeNull();
    }
  });

  it('refuses anything older, naming the version found and the minimum', () => {
    for (const version of ['2.9.10', '2.11.9', '2.10.24', '1.99.99']) {
      expect(serverVersionProblem(version)).toBe(`the NATS server is ${version}; Cairn needs ${MIN_NATS_SERVER_VERSION} or newer`);
    }
  });

  it('refuses a version it cannot read, or none', () => {
    expect(serverVersionProblem(undefined)).toMatch(/did not say its version/);
    expect(serverVersionProblem('')).toMatch(/did not say its version/);
    expect(serverVersionProblem('latest')).toMatch(/"latest" cannot be read/);
    expect(serverVersionProblem('x'.repeat(500))!.length).toBeLessThan(120);
  });

  it('compares numerically, not as text', () => {
    expect(parseServerVersion('2.100.0')).toEqual([2, 100, 0]);
    expect(serverVersionProblem('2.100.0', '2.12.0')).toBeNull();
    expect(serverVersionProblem('2.2.0', '2.12.0')).not.toBeNull();
  });
});
