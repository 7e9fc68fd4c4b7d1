// Verifies each file named on the command line as `cairn verify <file>` does (the CLI's own
// verifyFile and bundle checks) and prints one JSON line per file: the TypeScript verdict.
import { checkBundleClaims } from '../../../../apps/cli/dist/commands/verify.command.js';
import { verifyFile } from '../../../../apps/cli/dist/verify-file.js';

for (const path of process.argv.slice(2)) {
  let line;
  try {
    const checked = await verifyFile(path);
    const v = checked.verification;
    if (v.ok) {
      try {
        if (checked.claims !== undefined) checkBundleClaims(v, checked.claims);
        line = { path, ok: true, chainId: v.chainId, count: v.count, headHash: v.headHash };
      } catch (error) {
        line = { path, ok: false, reason: error.details?.reason ?? 'claims', firstBadSeq: error.details?.firstBadSeq ?? (error.details?.reason === 'run_id_mismatch' ? 1 : null) };
      }
    } else {
      line = { path, ok: false, reason: v.reason, firstBadSeq: v.firstBadSeq, verified: v.verified };
    }
  } catch (error) {
    line = { path, ok: false, reason: 'usage', message: error instanceof Error ? error.message : String(error) };
  }
  process.stdout.write(`${JSON.stringify(line)}\n`);
}
