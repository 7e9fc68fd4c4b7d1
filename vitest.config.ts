import { defineConfig } from 'vitest/config';

// Tests run against the TypeScript sources of the workspace packages (the `@cairn/source`
// export condition); the apps they spawn as processes run from `dist/` (built by `npm test`).
const resolve = { conditions: ['@cairn/source', 'module', 'node', 'development|production'] };

export default defineConfig({
  resolve,
  ssr: { resolve: { conditions: resolve.conditions } },
  test: {
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['{libs,apps,tools}/**/*.unit.spec.ts'], exclude: ['**/node_modules/**', '**/dist/**'] },
      },
      {
        extends: true,
        test: {
          name: 'int',
          include: ['{libs,apps,tools}/**/*.int.spec.ts'],
          exclude: ['**/node_modules/**', '**/dist/**'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
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
        },
      },
    ],
  },
});
