/**
 * One transaction-scoped advisory lock serializes every writer of the projections: live batches
 * (from any number of projector processes) and rebuilds. Taken first in each transaction, so every
 * later statement reads what the previous holder committed. 0x63616972 is "cair".
 */
export const PROJECTION_LOCK_SQL = 'SELECT pg_advisory_xact_lock(1667328370, 1)';

/** The name of the evidence projections' row in `projection_positions`. */
export const EVIDENCE_PROJECTION = 'evidence';
