// Served by the gateway under /dashboard/ (apps/gateway/src/dashboard). No inline script may be
// emitted: the gateway's Content-Security-Policy allows scripts from files only.
// (A plain object rather than defineConfig(): importing 'vite' here trips the lint's import resolver.)
/** @type {import('vite').UserConfig} */
export default {
  root: import.meta.dirname,
  base: '/dashboard/',
  oxc: { jsx: { runtime: 'automatic' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
  },
};
