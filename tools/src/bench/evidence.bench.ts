import { pathToFileURL } from 'node:url';
import { formatBenchResults, runAppendBench } from './evidence-append.bench.js';
import { formatRebuildBench, runRebuildBench } from './projection-rebuild.bench.js';

/**
 * `npm run bench:evidence`: the spine's figures, each beside a raw baseline measured in the same
 * run — chained appends (one chain, 64 chains in flight) vs plain JetStream publishes,
 * verifyChain vs plain sha256, projection rebuild vs a plain COPY of the same rows.
 */
export async function runEvidenceBench(): Promise<string> {
  const append = formatBenchResults(await runAppendBench());
  const rebuild = formatRebuildBench(await runRebuildBench());
  return `${append}\n\n${rebuild}\n`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  try {
    process.stdout.write(await runEvidenceBench());
  } catch (error) {
    process.stderr.write(`bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  }
}
