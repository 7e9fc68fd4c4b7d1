import { z } from 'zod';
import { RunIdSchema } from '../envelope.js';
import { ApprovalIdSchema } from '../event-fields.schema.js';
import { RunStateSchema } from '../run-state.schema.js';
import { storableText } from '../text-rules.js';

/* `POST /v1/runs/:id/approvals`: a person's decision on the approvals a run awaits (camelCase). */

export const ApprovalRequestSchema = z.strictObject({
  decision: z.enum(['approve', 'reject']),
  /** One approval by id (`image`, `egress`, `step-2`); absent: every approval the run awaits now. */
  approvalId: ApprovalIdSchema.optional(),
  comment: z.string().min(1).max(1024).check(storableText('a comment')).optional(),
});
export type ApprovalRequest = z.infer<typeof ApprovalRequestSchema>;

export const ApprovalAcceptedSchema = z.strictObject({
  runId: RunIdSchema,
  decision: z.enum(['approve', 'reject']),
  /** The run's state once the decision is on its chain: CANCELLED after a rejection. */
  state: RunStateSchema,
  /** True when this approver had decided so before: nothing new happened. */
  duplicate: z.boolean(),
});
export type ApprovalAccepted = z.infer<typeof ApprovalAcceptedSchema>;
