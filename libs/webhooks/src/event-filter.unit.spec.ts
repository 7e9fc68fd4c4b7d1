import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { filterMatches, parseEventFilter } from './event-filter.js';

function refused(patterns: string[]): string {
  try {
    parseEventFilter(patterns);
  } catch (error) {
    if (isCairnError(error) && error.code === 'E_INPUT') return error.message;
    throw error;
  }
  throw new Error(`${patterns.join(',')} was accepted`);
}

describe('event filters', () => {
  it('matches exact types, prefixes and everything', () => {
    expect(filterMatches(['run.*'], 'run.sealed')).toBe(true);
    expect(filterMatches(['run.*'], 'run.cancel_requested')).toBe(true);
    expect(filterMatches(['run.*'], 'step.completed')).toBe(false);
    expect(filterMatches(['alert.*'], 'alert.raised')).toBe(true);
    expect(filterMatches(['sandbox.exec.*'], 'sandbox.exec.completed')).toBe(true);
    expect(filterMatches(['sandbox.exec.*'], 'sandbox.created')).toBe(false);
    expect(filterMatches(['run.sealed'], 'run.sealed')).toBe(true);
    expect(filterMatches(['run.sealed'], 'run.submitted')).toBe(false);
    expect(filterMatches(['*'], 'kernel.facts')).toBe(true);
    // A prefix is whole segments: `run.*` is not `runner.x`, `run` alone is an exact type.
    expect(filterMatches(['run'], 'run.sealed')).toBe(false);
  });

  it('normalises: sorted, without repeats', () => {
    expect(parseEventFilter(['run.*', 'alert.*', 'run.*'])).toEqual(['alert.*', 'run.*']);
  });

  it('refuses empty lists, malformed patterns and patterns that match no event type', () => {
    expect(refused([])).toContain('at least one');
    expect(refused(['run.'])).toContain('events[0]');
    expect(refused(['run.*', 'RUN.*'])).toContain('events[1]');
    expect(refused(['run*'])).toContain('not an event type');
    expect(refused(['*.sealed'])).toContain('not an event type');
    expect(refused(['runs.*'])).toContain('matches no event type');
    expect(refused(['run.seald'])).toContain('matches no event type');
    expect(refused(Array.from({ length: 33 }, () => 'run.*'))).toContain('at most 32');
  });
});
