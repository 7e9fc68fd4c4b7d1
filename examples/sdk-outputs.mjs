/* global process, console, TextDecoder */
// A run submitted, waited for, its outputs read (each byte checked against the chain), a sandbox
// used and destroyed, and the run's chain verified offline.
//   CAIRN_URL=http://127.0.0.1:7420 CAIRN_API_KEY="$(cat ~/.cairn/api-key)" npm exec -- node examples/sdk-outputs.mjs
import { Cairn, verifyChain } from '@cairn/sdk';

const cairn = new Cairn({ url: process.env.CAIRN_URL ?? 'http://127.0.0.1:7420', apiKey: process.env.CAIRN_API_KEY ?? null });

const { runId } = await cairn.runs.submit({
  name: 'sdk example',
  image: 'cairn/sandbox-busybox:1',
  steps: [{ argv: ['sh', '-c', 'echo hello from a step; echo a warning >&2; echo done > /out/result.txt'] }],
  outputs: ['/out'],
  caps: { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 },
  network: 'none',
});
const run = await cairn.runs.wait(runId);
console.log(`${runId}: ${run.state}`);

const outputs = await cairn.runs.outputs(runId);
const text = (bytes) => new TextDecoder().decode(bytes);
for (const step of outputs.steps) console.log(`step ${step.index} stdout: ${text(step.stdout.bytes).trim()} | stderr: ${text(step.stderr.bytes).trim()}`);
for (const file of outputs.files) console.log(`${file.path} (${file.bytes.byteLength} bytes, sha256 ${file.sha256.slice(0, 12)}…): ${text(file.bytes).trim()}`);

{
  await using sandbox = await cairn.sandboxes.create({ image: 'cairn/sandbox-busybox:1' });
  await sandbox.writeFile('/work/in.txt', 'some input\n');
  const result = await sandbox.exec(['wc', '-c', '/work/in.txt']);
  console.log(`${sandbox.id}: wc says ${result.stdout.trim()}`);
} // destroyed here

const bundle = await cairn.runs.bundle(runId);
const verified = verifyChain(bundle.receipts, { chainId: runId, requireNonEmpty: true });
console.log(verified.ok ? `chain OK: ${verified.count} receipts, head ${verified.headHash}` : `chain BROKEN at seq ${verified.firstBadSeq}`);
