import { SERVICE_ROUTES } from '@cairn/config';
import { USAGE_RECEIPT_TYPES } from '@cairn/policy';
import { describe, expect, it } from 'vitest';

describe("policy's row of SERVICE_ROUTES", () => {
  it('names exactly the receipt types its usage ledger folds (its NATS user is derived from the row)', () => {
    expect([...(SERVICE_ROUTES.policy.folds ?? [])].sort()).toEqual([...USAGE_RECEIPT_TYPES].sort());
  });
});
