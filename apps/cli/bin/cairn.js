#!/usr/bin/env node
// Node's compile cache (docs/adr/0039-the-node-compile-cache.md): what V8 compiled of the CLI and
// the services is kept on disk, so the next start skips it (about a third of a start's CPU). The
// services `cairn up` starts inherit NODE_COMPILE_CACHE. Off with NODE_DISABLE_COMPILE_CACHE=1.
import { mkdirSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Makes `dir` one level at a time below an existing `root` (a recursive mkdir can spin on some filesystems); false if it cannot. */
function madeBelow(root, parts) {
  let dir = root;
  for (const part of ['', ...parts]) {
    dir = part === '' ? dir : join(dir, part);
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (error) {
      if (error?.code !== 'EEXIST') return false;
    }
  }
  return true;
}

if (typeof nodeModule.enableCompileCache === 'function' && process.env.NODE_DISABLE_COMPILE_CACHE === undefined) {
  if (process.env.NODE_COMPILE_CACHE === undefined) {
    const root = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
    if (madeBelow(root, ['cairn', 'node-compile'])) process.env.NODE_COMPILE_CACHE = join(root, 'cairn', 'node-compile');
  }
  if (process.env.NODE_COMPILE_CACHE !== undefined) nodeModule.enableCompileCache();
}
await import('../dist/main.js');
