import { pathToFileURL } from 'node:url';
import { formatDurabilityBench, runDurabilityBench } from './durability.bench.js';
import { formatBenchResults, runAppendBench } from './evidence-append.bench.js';
import { formatRebuildBench, runRebuildBench } from './projection-rebuild.bench.js';

/**
 * `npm run bench:evidence`: the spine's figures, each beside a raw baseline measured in the same
 * run — chained appends (one chain, 64 chains in flight) vs plain JetStream publishes,
 * verifyChain vs plain sha256, projection rebuild vs a plain COPY of the same rows — and what the
 * sync policy costs: appends with every write fsynced before its ack vs nats-server's default, on
 * servers of the bench's own (one node, three at R3).
 */
export async function runEvidenceBench(): Promise<string> {
  const append = formatBenchResults(await runAppendBench());
  const rebuild = formatRebuildBench(await runRebuildBench());
  const durability = formatDurabilityBench(await runDurabilityBench());
  return `${append}\n\n${rebuild}\n\n${durability}\n`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  try {
    process.stdout.write(await runEvidenceBench());
  } catch (error) {
    process.stderr.write(`bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
}
