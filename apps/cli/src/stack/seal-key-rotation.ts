import { CairnError } from '@cairn/contracts';
import { stackLocation, stackServiceConfig } from './stack-config.js';
import { readStackFile } from './stack-file.js';
import { stackRestart } from './stack-up.js';
import type { UpOptions } from './stack-up.js';

export interface SealKeyRotation {
  /** The new verifier key (`name+keyid+base64`), listed first in the public keys file. */
  current: string;
  /** The old one, kept in the file as retired. */
  retired: string;
  keyFile: string;
  publicKeysFile: string;
  /** The services restarted on the new files (none when the stack is not running). */
  restarted: string[];
}

/**
 * Rotates the stack's seal key (`rotateSealKeyFile`: the new verifier key is published before the
 * private key changes) and, when the stack runs, restarts the grader — which signs seals and
 * checkpoints with the key it read at boot — and the gateway, which serves the public keys.
 */
export async function rotateStackSealKey(env: NodeJS.ProcessEnv, options: UpOptions): Promise<SealKeyRotation> {
  const location = stackLocation(env);
  const running = await readStackFile(location.home);
  const config = running?.config ?? stackServiceConfig(env, location, 0);
  const keyFile = config.CAIRN_SEAL_KEY_FILE;
  const publicKeysFile = config.CAIRN_SEAL_PUBLIC_KEYS_FILE;
  if (keyFile === undefined || publicKeysFile === undefined) throw new CairnError('E_INPUT', `the stack in ${location.home} names no seal key file`);
  const { rotateSealKeyFile } = await import('@cairn/secret-store');
  const { current, retired } = await rotateSealKeyFile(keyFile, publicKeysFile);
  options.progress(`new seal key ${current}; ${retired} stays published as retired`);
  const restarted = running === null ? null : await stackRestart(env, ['grader', 'gateway'], options);
  return { current, retired, keyFile, publicKeysFile, restarted: restarted?.restarted ?? [] };
}
