import { readFile } from 'node:fs/promises';
import { CairnError } from '@cairn/contracts';
import { DEFAULT_POLICY, parsePolicy, policyVersion } from '@cairn/policy';
import type { PolicyDocument } from '@cairn/policy';

export interface LoadedPolicy {
  policy: PolicyDocument;
  version: string;
  source: 'file' | 'default';
}

/**
 * The policy document at `path` (CAIRN_POLICY_FILE, read as the policy service reads it) or the
 * built-in default. Read on each call, so the answer is the file as it is now; a file that is
 * missing or invalid is E_UNAVAILABLE naming the problem (the policy service would not start on it).
 */
export async function loadPolicyInForce(path: string | undefined): Promise<LoadedPolicy> {
  if (path === undefined) return { policy: DEFAULT_POLICY, version: policyVersion(DEFAULT_POLICY), source: 'default' };
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new CairnError('E_UNAVAILABLE', `the policy file (CAIRN_POLICY_FILE) cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  let policy: PolicyDocument;
  try {
    policy = parsePolicy(JSON.parse(text));
  } catch (error) {
    throw new CairnError('E_UNAVAILABLE', `the policy file (CAIRN_POLICY_FILE) is not a valid policy: ${error instanceof Error ? error.message : String(error)}`);
  }
  return { policy, version: policyVersion(policy), source: 'file' };
}
