import { z } from 'zod';
import { RunIdSchema, Sha256HexSchema, TimestampSchema } from '../envelope.js';
import { PolicyDocumentSchema } from '../policy-document.schema.js';

/* `GET /v1/policy`: the policy document in force, as the gateway reads it, and the version decisions named. */

export const PolicyInForceSchema = z.strictObject({
  /** sha256 of the document's canonical JSON: what every `policy.decided` receipt names as `policy_version`. */
  version: Sha256HexSchema,
  /** `file`: CAIRN_POLICY_FILE; `default`: the built-in policy (no file configured). */
  source: z.enum(['file', 'default']),
  policy: PolicyDocumentSchema,
  /**
   * The version named by the newest decision on one of this tenant's runs, and where: when it differs
   * from `version`, the policy service decided under another document (changed since it started).
   */
  lastDecision: z.strictObject({ version: Sha256HexSchema, runId: RunIdSchema, at: TimestampSchema }).nullable(),
});
export type PolicyInForce = z.infer<typeof PolicyInForceSchema>;
