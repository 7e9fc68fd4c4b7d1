import { lstat, readFile } from 'node:fs/promises';
import { CairnError } from '@cairn/contracts';
import type { Cairn } from '@cairn/sdk';
import { cairnClient } from '../cairn-client.js';
import { EVIDENCE_VARIABLES, stackHome } from './stack-config.js';
import { readApiKey, readStackFile } from './stack-file.js';
import type { StackFile } from './stack-file.js';

export interface StackTarget {
  client: Cairn;
  /** The key the client sends (`cairn mcp` hands it to the MCP gateway it starts). */
  apiKey: string;
  /** The stack file when the target came from one (not from CAIRN_URL). */
  stack: StackFile | null;
}

/**
 * The key in CAIRN_API_KEY_FILE (a compose stack's, say), or null when it is unset. The file must be
 * a regular file nobody but its owner may read; its owner may be another user (root reading the key a
 * container's user owns), since this only uses the key and keeps nothing.
 */
async function keyFromFile(env: NodeJS.ProcessEnv): Promise<string | null> {
  const path = env.CAIRN_API_KEY_FILE;
  if (path === undefined || path === '') return null;
  const refuse = (why: string): never => {
    throw new CairnError('E_INPUT', `CAIRN_API_KEY_FILE ${path} ${why}`, { variables: ['CAIRN_API_KEY_FILE'], path });
  };
  const stats = await lstat(path).catch((error: unknown) => refuse(`cannot be read: ${(error as NodeJS.ErrnoException).code ?? String(error)}`));
  if (!stats.isFile()) refuse('is not a regular file');
  if ((stats.mode & 0o077) !== 0) refuse(`has mode 0${(stats.mode & 0o777).toString(8)}: it must be readable by its owner only (chmod 600)`);
  const key = (await readFile(path, 'utf8')).trim();
  if (!/^cairn_[a-z2-7]{8}_[A-Za-z0-9_-]{43}$/.test(key)) refuse('does not hold one API key (cairn_<8-char prefix>_<secret>)');
  return key;
}

/**
 * The gateway later commands talk to: CAIRN_URL + CAIRN_API_KEY when set, else the stack started
 * from this state directory (`stack.json` and its key file).
 */
export async function resolveTarget(env: NodeJS.ProcessEnv): Promise<StackTarget> {
  const explicitKey = env.CAIRN_API_KEY !== undefined && env.CAIRN_API_KEY !== '' ? env.CAIRN_API_KEY : await keyFromFile(env);
  if (env.CAIRN_URL !== undefined && env.CAIRN_URL !== '') {
    if (!/^https?:\/\/[^\s]+$/.test(env.CAIRN_URL)) throw new CairnError('E_INPUT', 'invalid configuration: CAIRN_URL: an http:// or https:// URL', { variables: ['CAIRN_URL'] });
    if (explicitKey === null) throw new CairnError('E_INPUT', 'CAIRN_URL is set but CAIRN_API_KEY (or CAIRN_API_KEY_FILE) is not: the gateway needs a key', { variables: ['CAIRN_API_KEY'] });
    return { client: cairnClient(env.CAIRN_URL, explicitKey), apiKey: explicitKey, stack: null };
  }
  const home = stackHome(env);
  const stack = await readStackFile(home);
  if (stack === null) {
    throw new CairnError(
      'E_UNAVAILABLE',
      `no Cairn stack was started from ${home} (CAIRN_HOME): start one with \`npx --no-install cairn up\`, or set CAIRN_URL and CAIRN_API_KEY`,
      { home },
    );
  }
  const key = explicitKey ?? (await readApiKey(home));
  if (key === null) throw new CairnError('E_UNAUTHORIZED', `no API key in ${stack.keyFile}: run \`npx --no-install cairn up\` again, or set CAIRN_API_KEY`);
  return { client: cairnClient(stack.url, key), apiKey: key, stack };
}

/**
 * The environment with the running stack's evidence-log and database settings filled in where
 * the caller set none, so `cairn export` reads the stack's own stream.
 */
export async function withStackDefaults(env: NodeJS.ProcessEnv): Promise<NodeJS.ProcessEnv> {
  const stack = await readStackFile(stackHome(env)).catch(() => null);
  if (stack === null) return env;
  const merged: NodeJS.ProcessEnv = { ...env };
  for (const key of EVIDENCE_VARIABLES) {
    const value = stack.config[key];
    if ((merged[key] === undefined || merged[key] === '') && value !== undefined) merged[key] = value;
  }
  return merged;
}
