import { CairnError, EVENT_TYPES, MAX_FILTER_PATTERNS } from '@cairn/contracts';

/**
 * A webhook's event filter: a list of patterns, each `*` (every event), an exact event type
 * (`run.sealed`), or a prefix of a known type followed by `.*` (`run.*`, `alert.*`,
 * `sandbox.exec.*`). A pattern that could match no known type is refused, so a typo never
 * registers a webhook that silently receives nothing. At most MAX_FILTER_PATTERNS of them (the REST contract's bound).
 */

const PATTERN_SHAPE = /^(\*|[a-z][a-z_]*(\.[a-z][a-z_]*)*(\.\*)?)$/;

/** Checks and normalises (sorted, without repeats) a filter; E_INPUT naming the pattern otherwise. */
export function parseEventFilter(patterns: readonly string[]): string[] {
  if (patterns.length === 0) throw new CairnError('E_INPUT', 'events: give at least one event type or pattern (`run.*`, `alert.*`, `*`)', { field: 'events' });
  if (patterns.length > MAX_FILTER_PATTERNS) throw new CairnError('E_INPUT', `events: at most ${MAX_FILTER_PATTERNS} patterns`, { field: 'events' });
  for (const [index, pattern] of patterns.entries()) {
    if (!PATTERN_SHAPE.test(pattern)) {
      throw new CairnError('E_INPUT', `events[${index}]: ${JSON.stringify(pattern.slice(0, 80))} is not an event type, a prefix ending in .* or *`, { field: `events[${index}]` });
    }
    if (!EVENT_TYPES.some((type) => patternMatches(pattern, type))) {
      throw new CairnError('E_INPUT', `events[${index}]: ${JSON.stringify(pattern)} matches no event type`, { field: `events[${index}]` });
    }
  }
  return [...new Set(patterns)].sort();
}

function patternMatches(pattern: string, type: string): boolean {
  if (pattern === '*') return true;
  if (pattern.endsWith('.*')) return type.startsWith(pattern.slice(0, -1));
  return pattern === type;
}

/** Whether an event of `type` goes to a webhook with this (parsed) filter. */
export function filterMatches(filter: readonly string[], type: string): boolean {
  return filter.some((pattern) => patternMatches(pattern, type));
}
