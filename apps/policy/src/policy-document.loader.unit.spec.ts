import { DEFAULT_POLICY } from '@cairn/policy';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPolicyDocument } from './policy-document.loader.js';

const dir = mkdtempSync(join(tmpdir(), 'cairn-policy-loader-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('loadPolicyDocument', () => {
  it('is DEFAULT_POLICY without a file, and the file’s policy with one', () => {
    expect(loadPolicyDocument(undefined)).toBe(DEFAULT_POLICY);
    const lowered = { ...DEFAULT_POLICY, caps: { ...DEFAULT_POLICY.caps, max: { ...DEFAULT_POLICY.caps.max, pids: 128 } } };
    expect(loadPolicyDocument(file('ok.json', JSON.stringify(lowered)))).toEqual(lowered);
  });

  it('refuses, naming the variable and the field, a policy that raises a frozen cap', () => {
    const raised = { ...DEFAULT_POLICY, caps: { ...DEFAULT_POLICY.caps, max: { ...DEFAULT_POLICY.caps.max, memoryMiB: 65_536 } } };
    expect(() => loadPolicyDocument(file('raised.json', JSON.stringify(raised)))).toThrow(/CAIRN_POLICY_FILE.*caps\.max\.memoryMiB/);
  });

  it('refuses a missing file and one that is not JSON', () => {
    expect(() => loadPolicyDocument(join(dir, 'absent.json'))).toThrow(/CAIRN_POLICY_FILE: cannot read/);
    expect(() => loadPolicyDocument(file('bad.json', '{ nope'))).toThrow(/CAIRN_POLICY_FILE: .* is not JSON/);
  });
});
