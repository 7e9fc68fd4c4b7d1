import { CairnError } from '@cairn/contracts';
import { DEFAULT_POLICY, parsePolicy } from '@cairn/policy';
import type { PolicyDocument } from '@cairn/policy';
import { readFileSync } from 'node:fs';

/**
 * The policy in force: the JSON document at `path`, validated (a document that raises a frozen cap
 * or breaks the schema stops the service at boot, naming the file and the field), or DEFAULT_POLICY.
 */
export function loadPolicyDocument(path: string | undefined): PolicyDocument {
  if (path === undefined) return DEFAULT_POLICY;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new CairnError('E_INPUT', `CAIRN_POLICY_FILE: cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    throw new CairnError('E_INPUT', `CAIRN_POLICY_FILE: ${path} is not JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  try {
    return parsePolicy(doc);
  } catch (error) {
    throw new CairnError('E_INPUT', `CAIRN_POLICY_FILE: ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
}
