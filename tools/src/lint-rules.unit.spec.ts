import { ESLint } from 'eslint';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

/*
 * The lint rules that guard the architecture see what they guard. Each case lints a real source
 * file of the workspace as if one import were added to it, with the repository's own
 * eslint.config.mjs, and expects the rule to name it. Before, import-x read `.js` files only (so
 * no-cycle followed nothing) and the module-boundary rule was skipped whenever Nx had not cached
 * its project graph yet — as on a clean CI clone, where lint runs before any build.
 */
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

let eslint: ESLint;

beforeAll(() => {
  eslint = new ESLint({ cwd: ROOT });
});

/** The rule ids reported for `file` with `line` appended, and their messages. */
async function lintWith(file: string, line: string): Promise<{ rules: string[]; messages: string[] }> {
  const filePath = join(ROOT, file);
  const text = `${await readFile(filePath, 'utf8')}\n${line}\n`;
  const [result] = await eslint.lintText(text, { filePath });
  const messages = result?.messages ?? [];
  return { rules: messages.map((m) => m.ruleId ?? '(fatal)'), messages: messages.map((m) => m.message) };
}

describe('the lint rules see what they guard', () => {
  it('the unchanged file lints clean (so each case below fails for its one added import)', async () => {
    const filePath = join(ROOT, 'libs/evidence/src/verify-chain.ts');
    const [result] = await eslint.lintText(await readFile(filePath, 'utf8'), { filePath });
    expect(result?.messages ?? []).toEqual([]);
  }, 120_000);

  it('import-x/no-cycle follows a relative `.js` import to its `.ts` source', async () => {
    // index.ts re-exports verify-chain.ts: importing the index back closes a cycle.
    const { rules } = await lintWith('libs/evidence/src/verify-chain.ts', "import './index.js';");
    expect(rules).toContain('import-x/no-cycle');
  }, 120_000);

  it('import-x/no-cycle follows a workspace package to its sources (@cairn/evidence imports @cairn/contracts)', async () => {
    const { rules } = await lintWith('libs/contracts/src/index.ts', "import '@cairn/evidence';");
    expect(rules).toContain('import-x/no-cycle');
  }, 120_000);

  it('the module-boundary rule runs (Nx project graph present) and refuses a domain library importing an adapter', async () => {
    const { rules, messages } = await lintWith('libs/evidence/src/verify-chain.ts', "import '@cairn/config';");
    expect(rules).toContain('@nx/enforce-module-boundaries');
    expect(messages.join('\n')).toMatch(/type:domain/);
  }, 120_000);

  it('the module-boundary rule refuses a service importing another service: they talk only through NATS', async () => {
    const { rules, messages } = await lintWith('apps/scheduler/src/placement.ts', "import '@cairn/intake';");
    expect(rules).toContain('@nx/enforce-module-boundaries');
    expect(messages.join('\n')).toMatch(/scope:scheduler|type:app/);
  }, 120_000);
});
