import type { ValueTransformer } from 'typeorm';

/**
 * `bigint` columns come back from `pg` as strings. Stream sequences stay far below 2^53, so a
 * JavaScript number is exact; anything larger is refused rather than silently rounded.
 */
export const bigintAsNumber: ValueTransformer = {
  to: (value: number | null | undefined) => value,
  from: (value: string | null) => {
    if (value === null) return null;
    const n = Number(value);
    if (!Number.isSafeInteger(n)) throw new RangeError(`bigint ${value} is beyond Number.MAX_SAFE_INTEGER`);
    return n;
  },
};
