import { canonicalJson, sha256Hex } from '@cairn/evidence';
import type { PolicyDocument } from './policy-document.schema.js';

/**
 * The version every decision names: sha256 (hex) of the document's canonical JSON (RFC 8785),
 * so the same policy has the same version whatever its key order or formatting.
 */
export function policyVersion(policy: PolicyDocument): string {
  return sha256Hex(canonicalJson(policy));
}
