import { CairnError } from '@cairn/contracts';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';

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

/** What `cairn projections check` found, as the persistence library reports it. */
export interface CheckSummary {
  lastStreamSeq: number;
  events: number;
  poison: number;
  runs: number;
  sandboxes: number;
  drift: readonly { table: string; key: string; kind: 'edited' | 'missing' | 'extra'; columns: readonly string[]; live: Readonly<Record<string, unknown>> | null; log: Readonly<Record<string, unknown>> | null }[];
  driftCount: number;
  durationMs: number;
}

/** Rows named in a failure's details: enough to act on, never the whole table. */
const DRIFT_DETAILS = 20;

function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? 'null';
  return text.length > 120 ? `${text.slice(0, 117)}…` : text;
}

/** One line per drifting row, for people. */
export function formatDrift(drift: CheckSummary['drift'][number]): string {
  const row = `${drift.table} ${drift.key}`;
  if (drift.kind === 'missing') return `  ${row}: in the log, missing from the projections`;
  if (drift.kind === 'extra') return `  ${row}: in the projections, not in the log`;
  const columns = drift.columns.map((column) => `${column}: projections ${shown(drift.live?.[column])}, log ${shown(drift.log?.[column])}`);
  return `  ${row}: edited — ${columns.join('; ')}`;
}

/**
 * The check's answer: the OK line when the projections are the log's fold, else E_CONFLICT naming
 * how many rows drift (details carry the first few); `lines` are the drifting rows for stderr.
 */
export function formatCheck(summary: CheckSummary, okMark: string): { human: string; machine: Record<string, unknown> } | { lines: string[]; error: CairnError } {
  const counts = `${summary.events} events, ${summary.poison} poison, ${summary.runs} runs, ${summary.sandboxes} sandboxes up to stream seq ${summary.lastStreamSeq}`;
  if (summary.driftCount === 0) {
    return {
      human: `${okMark}  the projections are the log's fold: ${counts}  (${(summary.durationMs / 1000).toFixed(2)} s)`,
      machine: { ok: true, lastStreamSeq: summary.lastStreamSeq, events: summary.events, poison: summary.poison, runs: summary.runs, sandboxes: summary.sandboxes, driftCount: 0, durationMs: Math.round(summary.durationMs) },
    };
  }
  const more = summary.driftCount - summary.drift.length;
  const lines = [...summary.drift.map(formatDrift), ...(more > 0 ? [`  … and ${more} more`] : [])];
  const rows = summary.driftCount === 1 ? '1 row' : `${summary.driftCount} rows`;
  const error = new CairnError(
    'E_CONFLICT',
    `the projections disagree with the log in ${rows} (compared up to stream seq ${summary.lastStreamSeq}); the log is the truth: \`cairn projections rebuild\` replaces them`,
    { lastStreamSeq: summary.lastStreamSeq, driftCount: summary.driftCount, drift: summary.drift.slice(0, DRIFT_DETAILS) },
  );
  return { lines, error };
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
  projections
    .command('check')
    .description('compare the projections with what the evidence log folds to, row by row, changing neither')
    .option('--limit <rows>', 'name at most this many drifting rows per table', (value) => positiveInteger(value), 100)
    .addHelpText(
      'after',
      '\nReads NATS (CAIRN_NATS_URL, CAIRN_EVIDENCE_STREAM, CAIRN_EVIDENCE_SUBJECT_PREFIX) and PostgreSQL (CAIRN_DATABASE_URL); writes nothing.\n' +
        'Compared at the position the projections stand at, so a live projector need not stop. A row edited, deleted or\n' +
        'added in PostgreSQL is named with its columns; `cairn projections rebuild` replaces the projections from the log.\n' +
        'Exit status: 0 the projections are the log\'s fold, 1 they are not (E_CONFLICT) or a server cannot be reached (E_UNAVAILABLE).',
    )
    .action(async (options: { limit: number }, command: Command) => {
      const output = context.output(command);
      const { databaseUrl, openEvidenceLog, withPostgres } = await import('../connections.js');
      const { withStackDefaults } = await import('../stack/stack-target.js');
      const env = await withStackDefaults(context.env);
      const url = databaseUrl(env);
      const { checkProjections } = await import('@cairn/persistence');
      const evidence = await openEvidenceLog(env);
      try {
        output.note(`checking the projections against ${evidence.log.streamName}…`);
        const progress = output.progress();
        const summary = await withPostgres(url, () =>
          checkProjections({
            url,
            log: evidence.log,
            limit: options.limit,
            onProgress: (p) => progress.update(`stream seq ${p.streamSeq} of ${p.lastStreamSeq}: ${p.events} events`),
            progressEvery: 1_000,
          }),
        );
        progress.done();
        const answer = formatCheck(summary, output.okMark());
        if ('error' in answer) {
          if (!output.json) for (const line of answer.lines) output.note(line);
          throw answer.error;
        }
        output.result(answer.human, answer.machine);
      } finally {
        await evidence.close();
      }
    });
}

function positiveInteger(value: string): number {
  if (!/^[1-9][0-9]{0,5}$/.test(value)) throw usageError(`--limit takes a whole number from 1 to 999999, not ${JSON.stringify(value)}`);
  return Number(value);
}
