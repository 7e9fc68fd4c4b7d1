import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// Node's compile cache (docs/adr/0039), as `cairn` keeps it: the test workers and every process
// the tests start (services, the CLI, which pass it on) skip compiling what an earlier start compiled.
if (process.env.NODE_COMPILE_CACHE === undefined && process.env.NODE_DISABLE_COMPILE_CACHE === undefined) {
  const dir = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'cairn', 'node-compile');
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    process.env.NODE_COMPILE_CACHE = dir;
  } catch {
    // No cache: every start compiles, as without one.
  }
}

// Tests run against the TypeScript sources of the workspace packages (the `@cairn/source`
// export condition); the apps they spawn as processes run from `dist/` (built by `npm test`).
const resolve = { conditions: ['@cairn/source', 'module', 'node', 'development|production'] };

/*
 * Which tiers run when, and how many files at once (docs/testing.md, "How the suites run"). Unit and
 * int first, one file at a time (vitest's default on 2 cores: cores − 1). Then the e2e and hostile
 * files, two at a time: each drives a whole stack of its own (own streams, database, worker and
 * containers, so two never collide) and spends most of its time waiting on it. The fault suite last.
 */
// Group 0 is not used: vitest runs a group-0 project of one worker after every numbered group.
const ONE_AT_A_TIME = { sequence: { groupOrder: 1 }, maxWorkers: 1 } as const;
const WHOLE_STACKS = { sequence: { groupOrder: 2 }, maxWorkers: Number(process.env.CAIRN_STACK_TEST_WORKERS ?? 2) } as const;

export default defineConfig({
  resolve,
  ssr: { resolve: { conditions: resolve.conditions } },
  test: {
    projects: [
      {
        extends: true,
        // Pure logic: its files share one module graph (no isolation), which took the tier from about
        // 114 s to 41 s on this machine — almost all of it was importing the same modules again per file.
        test: { name: 'unit', include: ['{libs,apps,tools}/**/*.unit.spec.ts'], exclude: ['**/node_modules/**', '**/dist/**'], isolate: false, ...ONE_AT_A_TIME },
      },
      {
        extends: true,
        test: {
          name: 'int',
          include: ['{libs,apps,tools}/**/*.int.spec.ts'],
          exclude: ['**/node_modules/**', '**/dist/**'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          ...ONE_AT_A_TIME,
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['{libs,apps,tools}/**/*.e2e.spec.ts'],
          exclude: ['**/node_modules/**', '**/dist/**'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          ...WHOLE_STACKS,
        },
      },
      {
        // The fault suite (`npm run test:faults`): a fault injected into real processes, then every
        // invariant of @cairn/fault-testing checked (docs/testing.md, "The fault matrix").
        extends: true,
        test: {
          name: 'faults',
          include: ['{libs,apps,tools}/**/*.fault.spec.ts'],
          exclude: ['**/node_modules/**', '**/dist/**'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          // Last, and one file at a time: its faults (a process killed, a lease left to expire, a
          // store filled) are judged on timing that a second stack beside it would skew.
          sequence: { groupOrder: 3 },
          maxWorkers: 1,
        },
      },
      {
        // Hostile workloads submitted through a whole isolated stack (`npm run test:hostile`).
        extends: true,
        test: {
          name: 'hostile',
          include: ['{libs,apps,tools}/**/*.hostile.spec.ts'],
          exclude: ['**/node_modules/**', '**/dist/**'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          ...WHOLE_STACKS,
        },
      },
    ],
  },
});
