// @ts-check
/* global process */
import js from '@eslint/js';
import nx from '@nx/eslint-plugin';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Roots of the projects tagged with `tag`, read from their package.json (the tags Nx uses). */
function projectRootsTagged(tag) {
  return ['libs', 'apps']
    .flatMap((dir) => readdirSync(dir).map((name) => `${dir}/${name}`))
    .filter((root) => {
      try {
        const pkg = JSON.parse(readFileSync(`${root}/package.json`, 'utf8'));
        return (pkg.nx?.tags ?? []).includes(tag);
      } catch {
        return false;
      }
    });
}

// @nx/enforce-module-boundaries reads the project graph Nx cached, and without one it skips itself
// with a warning that --max-warnings does not count: on a clean clone, where lint ran before any Nx
// command, it guarded nothing. `npm run lint` computes the graph first; anything else fails closed.
const projectGraph = join(process.env.NX_WORKSPACE_DATA_DIRECTORY ?? '.nx/workspace-data', 'project-graph.json');
if (!existsSync(join(import.meta.dirname, projectGraph)) && !existsSync(projectGraph)) {
  throw new Error(`no Nx project graph at ${projectGraph}: the module-boundary rule would be skipped. Run \`npm run lint\` (or \`npx nx show projects\` first).`);
}

/** The `scope:` tag of each app: each may depend on shared libraries and on its own scope only. */
const appScopes = readdirSync('apps').flatMap((name) => {
  try {
    return (JSON.parse(readFileSync(`apps/${name}/package.json`, 'utf8')).nx?.tags ?? []).filter((tag) => tag.startsWith('scope:'));
  } catch {
    return [];
  }
});

// Modules a domain library may never import (invariant I-1): adapters, frameworks, brokers,
// engines, databases and network modules. Domain code decides; adapters do IO.
const bannedInDomain = [
  '@nestjs/*',
  '@nats-io/*',
  'nats',
  'dockerode',
  'typeorm',
  'pg',
  'fastify',
  'node:net',
  'node:http',
  'node:https',
  'node:http2',
  'node:dgram',
  'node:dns',
  'node:tls',
  'node:child_process',
  'node:fs',
  'node:fs/promises',
  'net',
  'http',
  'https',
  'dgram',
  'dns',
  'tls',
  'child_process',
  'fs',
];

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/.nx/**', 'coverage/**', '**/bin/*.js', '.venv/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@nx': nx, 'import-x': importX },
    settings: {
      // import-x resolves as the compiler does: `./x.js` to `./x.ts`, and `@cairn/*` to each package's
      // TypeScript sources (the `@cairn/source` export condition), so no-cycle follows every import
      // across the workspace rather than stopping at what it cannot resolve.
      // Without these import-x reads `.js` files only, and so built no module map of any of our
      // sources: no-cycle had nothing to follow.
      'import-x/extensions': importX.flatConfigs.typescript.settings['import-x/extensions'],
      'import-x/parsers': importX.flatConfigs.typescript.settings['import-x/parsers'],
      // The workspace's own packages are internal code, whose cycles count.
      'import-x/internal-regex': '^@cairn/',
      'import-x/resolver-next': [
        createTypeScriptImportResolver({
          project: ['tsconfig.json', 'apps/dashboard/src/tsconfig.json'],
          conditionNames: ['@cairn/source', 'types', 'import', 'node', 'default'],
        }),
      ],
    },
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          allow: [],
          banTransitiveDependencies: false,
          checkNestedExternalImports: true,
          depConstraints: [
            { sourceTag: 'type:contracts', onlyDependOnLibsWithTags: [], bannedExternalImports: bannedInDomain.filter((m) => m !== 'zod') },
            { sourceTag: 'type:domain', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain'], bannedExternalImports: bannedInDomain },
            { sourceTag: 'type:adapter', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:adapter', 'type:testing'] },
            { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:adapter', 'type:testing'] },
            { sourceTag: 'type:tool', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:adapter', 'type:testing'] },
            { sourceTag: 'type:testing', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:adapter'] },
            // Services talk only through NATS: a service's code never imports another service's, and
            // a shared library never imports any service's (docs/architecture.md, "Module boundaries").
            { sourceTag: 'scope:shared', onlyDependOnLibsWithTags: ['scope:shared'] },
            ...appScopes.map((scope) => ({ sourceTag: scope, onlyDependOnLibsWithTags: ['scope:shared', scope] })),
          ],
        },
      ],
      'import-x/no-cycle': 'error',
      'import-x/no-self-import': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/consistent-type-imports': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.property.name='only']", message: 'No focused tests.' },
        { selector: "CallExpression[callee.property.name='skip']", message: 'No skipped tests.' },
      ],
    },
  },
  {
    // I-1 for Node built-ins, which the module-boundary rule does not see.
    files: [...projectRootsTagged('type:domain'), ...projectRootsTagged('type:contracts')].map((root) => `${root}/src/**/*.ts`),
    // Build-time generators under src/tools/ write files; they are not domain code.
    ignores: ['**/*.spec.ts', '**/src/tools/**'],
    rules: {
      'no-restricted-imports': ['error', { paths: bannedInDomain.filter((m) => !m.includes('*')), patterns: ['@nestjs/*', '@nats-io/*'] }],
    },
  },
  {
    // @cairn/sdk's client runs in browsers too (the dashboard): no Node module and no Node global in
    // its sources, and only the browser-safe part of @cairn/evidence (its main entry hashes with
    // node:crypto; the package's own index re-exports the verifier from it, for Node).
    files: ['libs/sdk/src/**/*.ts'],
    ignores: ['**/*.spec.ts', 'libs/sdk/src/index.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: '@cairn/evidence', message: 'the client is browser-safe: take @cairn/evidence/json-lines (the main entry hashes with node:crypto)' }],
          patterns: [{ group: ['node:*'], message: 'the client is browser-safe: no Node modules' }],
        },
      ],
      'no-restricted-globals': ['error', 'Buffer', 'process', 'require', '__dirname', '__filename', 'global'],
    },
  },
  {
    // The dashboard reaches the API only through @cairn/sdk (apps/dashboard/src/api/cairn.ts): no
    // page sends a request of its own, so no REST shape is copied into it again.
    files: ['apps/dashboard/src/**/*.ts', 'apps/dashboard/src/**/*.tsx'],
    rules: {
      'no-restricted-globals': [
        'error',
        ...['fetch', 'XMLHttpRequest', 'EventSource', 'WebSocket'].map((name) => ({ name, message: 'the dashboard talks to the API through @cairn/sdk (src/api/cairn.ts) only' })),
      ],
      'no-restricted-properties': [
        'error',
        ...['window', 'globalThis', 'self'].map((object) => ({ object, property: 'fetch', message: 'the dashboard talks to the API through @cairn/sdk (src/api/cairn.ts) only' })),
      ],
    },
  },
  {
    // The page bundles only browser-safe code: @cairn/evidence's main entry hashes with node:crypto
    // (the page hashes with WebCrypto, src/chain/verify-chain.ts); its recorded-breaks entry is pure.
    files: ['apps/dashboard/src/**/*.ts', 'apps/dashboard/src/**/*.tsx'],
    ignores: ['**/*.spec.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: '@cairn/evidence', message: 'the dashboard is browser-safe: take @cairn/evidence/recorded-breaks (the main entry hashes with node:crypto)' }],
          patterns: [{ group: ['node:*'], message: 'the dashboard runs in a browser: no Node modules' }],
        },
      ],
    },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // The Python tests' Node helpers (sdk/python/tests/js): scripts on the project's Node.
    files: ['sdk/**/*.mjs'],
    languageOptions: { globals: { process: 'readonly' } },
  },
  {
    files: ['**/*.spec.ts'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/unbound-method': 'off',
    },
  },
);
