import { canonicalJson, sha256Hex } from '@cairn/evidence';
import type { PolicyDocument } from '@cairn/contracts';

/** Versions of the documents seen, by object: a service decides every run under the same one. */
const versions = new WeakMap<PolicyDocument, string>();

/**
 * The version every decision names: sha256 (hex) of the document's canonical JSON (RFC 8785),
 * so the same policy has the same version whatever its key order or formatting. Computed once per
 * document object — a loaded policy is never changed in place (a new policy is a new object).
 */
export function policyVersion(policy: PolicyDocument): string {
  let version = versions.get(policy);
  if (version === undefined) {
    version = sha256Hex(canonicalJson(policy));
    versions.set(policy, version);
  }
  return version;
}
