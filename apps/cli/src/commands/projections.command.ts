import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';

export interface RebuildSummary {
  events: number;
  poison: number;
  runs: number;
  lastStreamSeq: number;
  durationMs: number;
}

/** Events per second, rounded; a rebuild that took no measurable time reports its event count. */
export function eventsPerSecond(summary: Pick<RebuildSummary, 'events' | 'durationMs'>): number {
  return summary.durationMs > 0 ? Math.round((summary.events * 1000) / summary.durationMs) : summary.events;
}

export function formatRebuild(summary: RebuildSummary, okMark: string): { human: string; machine: Record<string, unknown> } {
  const rate = eventsPerSecond(summary);
  return {
    human:
      `${okMark}  rebuilt projections: ${summary.events} events, ${summary.poison} poison, ${summary.runs} runs` +
      `  (${(summary.durationMs / 1000).toFixed(2)} s, ${rate} events/s, up to stream seq ${summary.lastStreamSeq})`,
    machine: { ok: true, ...summary, durationMs: Math.round(summary.durationMs), eventsPerSecond: rate },
  };
}

/** Migrations and a rebuild on a reachable server finish well inside this; an unanswering one does not. */
const DATABASE_TIMEOUT_MS = 30_000;

export function registerProjectionsCommand(program: Command, context: CommandContext): void {
  const projections = program.command('projections').description('manage the PostgreSQL projections of the evidence log');
  projections
    .command('migrate')
    .description("run the projections' migrations only (`cairn up` and `cairn db-roles` run them as the projector's role)")
    .addHelpText('after', '\nWrites PostgreSQL (CAIRN_DATABASE_URL). Exit status: 0 up to date, 1 failed (E_UNAVAILABLE when PostgreSQL cannot be reached).')
    .action(async (_options: unknown, command: Command) => {
      const output = context.output(command);
      const { CONNECT_TIMEOUT_MS, databaseUrl, withPostgres } = await import('../connections.js');
      const { withStackDefaults } = await import('../stack/stack-target.js');
      const url = databaseUrl(await withStackDefaults(context.env));
      const { migrate } = await import('@cairn/persistence');
      const applied = await withPostgres(url, () => migrate(url), CONNECT_TIMEOUT_MS + DATABASE_TIMEOUT_MS);
      output.result(`${output.okMark()}  ${applied.length === 0 ? 'schema up to date' : `applied ${applied.join(', ')}`}`, { ok: true, applied });
    });
  projections
    .command('rebuild')
    .description('run the migrations, then rebuild every projection from the evidence stream (the log is the truth)')
    .addHelpText(
      'after',
      '\nReads NATS (CAIRN_NATS_URL, CAIRN_EVIDENCE_STREAM, CAIRN_EVIDENCE_SUBJECT_PREFIX) and writes PostgreSQL (CAIRN_DATABASE_URL).\n' +
        'The tables are replaced in one transaction; live projector writes wait for it.\n' +
        'Exit status: 0 rebuilt, 1 failed (E_UNAVAILABLE when NATS or PostgreSQL cannot be reached).',
    )
    .action(async (_options: unknown, command: Command) => {
      const output = context.output(command);
      // Loaded on use: TypeORM, pg and the NATS client cost start-up time `cairn verify` should not pay.
      const { CONNECT_TIMEOUT_MS, databaseUrl, openEvidenceLog, withPostgres } = await import('../connections.js');
      const { withStackDefaults } = await import('../stack/stack-target.js');
      const env = await withStackDefaults(context.env);
      const url = databaseUrl(env);
      const { migrate, rebuildProjections } = await import('@cairn/persistence');

      output.note('running migrations…');
      const applied = await withPostgres(url, () => migrate(url), CONNECT_TIMEOUT_MS + DATABASE_TIMEOUT_MS);
      output.note(applied.length === 0 ? 'schema up to date' : `applied ${applied.join(', ')}`);

      const evidence = await openEvidenceLog(env);
      try {
        output.note(`rebuilding projections from ${evidence.log.streamName}…`);
        const progress = output.progress();
        // No timeout: a long log takes as long as it takes, and progress shows it moving.
        const summary = await withPostgres(url, () =>
          rebuildProjections({
            url,
            log: evidence.log,
            onProgress: (p) => progress.update(`stream seq ${p.streamSeq} of ${p.lastStreamSeq}: ${p.events} events, ${p.poison} poison`),
            progressEvery: 1_000,
          }),
        );
        progress.done();
        const { human, machine } = formatRebuild(summary, output.okMark());
        output.result(human, machine);
      } finally {
        await evidence.close();
      }
    });
}
