import { WorkerIdSchema } from '@cairn/contracts';
import type { Worker } from '@cairn/contracts';
import type { Command } from 'commander';
import type { CommandContext } from '../command-context.js';
import { usageError } from '../exit-codes.js';
import { resolveTarget } from '../stack/stack-target.js';

/*
 * `cairn workers` and `cairn workers drain|undrain <id>` (docs/adr/0026): the stack's runtime
 * workers through the gateway — status, capacity and what is in use — and the operator's drain,
 * which stops new placements on a worker while what it runs finishes.
 */

function parseWorkerId(value: string): string {
  const parsed = WorkerIdSchema.safeParse(value);
  if (!parsed.success) throw usageError(`invalid worker id ${JSON.stringify(value.slice(0, 80))}: as \`cairn workers\` shows it`);
  return parsed.data;
}

function round(n: number): string {
  return String(Math.round(n * 100) / 100);
}

/** `3s ago`, `2m ago`, `1h ago` (a heartbeat from the future: `now`). */
export function ago(iso: string, now: number): string {
  const seconds = Math.floor((now - Date.parse(iso)) / 1000);
  if (!Number.isFinite(seconds) || seconds <= 0) return 'now';
  if (seconds < 120) return `${seconds}s ago`;
  if (seconds < 7200) return `${Math.floor(seconds / 60)}m ago`;
  return `${Math.floor(seconds / 3600)}h ago`;
}

/** The workers as a table: what each holds of its capacity, in use/total, and how it stands. */
export function workersTable(workers: readonly Worker[], now: number): string {
  if (workers.length === 0) return 'no workers registered';
  const header = ['WORKER', 'STATUS', 'SLOTS', 'MEMORY MiB', 'CPU', 'DISK MiB', 'PIDS', 'RUNS', 'SANDBOXES', 'IMAGES', 'HEARTBEAT'];
  const rows = workers.map((w) => [
    w.workerId,
    w.drain !== null && w.status !== 'draining' ? `${w.status} (drained)` : w.status,
    `${w.reserved.slots}/${w.capacity.slots}`,
    `${w.reserved.memoryMiB}/${w.capacity.memoryMiB}`,
    `${round(w.reserved.cpus)}/${round(w.capacity.cpus * (w.capacity.cpuOversubscription ?? 1))}`,
    `${w.reserved.diskMiB}/${w.capacity.diskMiB}`,
    `${w.reserved.pids}/${w.capacity.pids ?? '-'}`,
    String(w.runs),
    String(w.sandboxes),
    String(Object.keys(w.images).length),
    ago(w.lastHeartbeatAt, now),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows].map((cells) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n');
}

export function registerWorkersCommand(program: Command, context: CommandContext): void {
  const workers = program
    .command('workers')
    .description('the runtime workers: status, capacity and what is in use, runs and sandboxes in flight; drain one')
    .addHelpText(
      'after',
      '\nNeeds an admin key; draining needs the operator\'s (an admin key of tenant default, e.g. the one `cairn up` made).\n' +
        'STATUS is eligible, draining, unhealthy, stale (no heartbeat lately) or overloaded (full). CPU counts shares\n' +
        '(CPUs × CAIRN_WORKER_CPU_OVERSUBSCRIPTION).\n\nExamples:\n  cairn workers\n  cairn workers drain w1-3f2a9c01      # nothing new goes there; its runs finish\n  cairn workers undrain w1-3f2a9c01',
    )
    .action(async (_options: unknown, command: Command) => {
      const output = context.output(command);
      const { client } = await resolveTarget(context.env);
      const listed = await client.operator.workers();
      output.result(workersTable(listed.items, Date.now()), { ok: true, items: listed.items });
    });

  workers
    .command('drain')
    .description('stop new placements on a worker; the runs and sandbox sessions it holds finish normally (kept across its restarts)')
    .argument('<id>', 'the worker id (cairn workers)')
    .option('--cancel', 'lift the drain instead (as `cairn workers undrain`)')
    .action(async (rawId: string, options: { cancel?: boolean }, command: Command) => {
      const output = context.output(command);
      const id = parseWorkerId(rawId);
      const { client } = await resolveTarget(context.env);
      const worker = options.cancel === true ? await client.operator.undrainWorker(id) : await client.operator.drainWorker(id);
      const human =
        options.cancel === true
          ? `${output.okMark()}  worker ${worker.workerId} undrained: ${worker.status}`
          : `${output.okMark()}  worker ${worker.workerId} drained since ${worker.drain?.since ?? '-'}: ${worker.runs} runs and ${worker.sandboxes} sandboxes still in flight finish there`;
      output.result(human, { ok: true, worker });
    });

  workers
    .command('undrain')
    .description("lift an operator's drain: the worker takes new work again")
    .argument('<id>', 'the worker id (cairn workers)')
    .action(async (rawId: string, _options: unknown, command: Command) => {
      const output = context.output(command);
      const id = parseWorkerId(rawId);
      const { client } = await resolveTarget(context.env);
      const worker = await client.operator.undrainWorker(id);
      output.result(`${output.okMark()}  worker ${worker.workerId} undrained: ${worker.status}`, { ok: true, worker });
    });
}
