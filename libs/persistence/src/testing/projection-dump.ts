import type { DataSource } from 'typeorm';

/**
 * Every projection table, ordered, as JSON rows — for comparing live projections with a rebuild.
 * Left out: `poison_events.recorded_at` and `projection_positions.updated_at`, the wall-clock time
 * a row was written, which differs between a live write and a rebuild by nature. Every other
 * column is compared, including the receipt jsonb and the runs' and sandboxes' times (those come
 * from receipt `ts`, not the clock).
 */
export async function dumpProjections(dataSource: DataSource): Promise<Record<string, unknown[]>> {
  const rows = async (sql: string) => (await dataSource.query<{ row: unknown }[]>(sql)).map((r) => r.row);
  return {
    evidence_events: await rows('SELECT to_jsonb(t) AS row FROM evidence_events t ORDER BY stream_seq'),
    runs: await rows('SELECT to_jsonb(t) AS row FROM runs t ORDER BY run_id'),
    sandboxes: await rows('SELECT to_jsonb(t) AS row FROM sandboxes t ORDER BY sandbox_id'),
    poison_events: await rows(`SELECT to_jsonb(t) - 'recorded_at' AS row FROM poison_events t ORDER BY stream_seq`),
    projection_positions: await rows(`SELECT to_jsonb(t) - 'updated_at' AS row FROM projection_positions t ORDER BY name`),
  };
}
