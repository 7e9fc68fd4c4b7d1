import { z } from 'zod';
import { AdminKeyCreatedSchema, AdminKeyRevokedSchema, AdminKeyRotatedSchema, AdminPolicyChangedSchema, AdminTenantCreatedSchema } from './admin-events.schema.js';
import { deepFreeze } from './deep-freeze.js';
import { receiptSchemaOf } from './event-fields.schema.js';
import {
  ApprovalGrantedSchema,
  ApprovalRejectedSchema,
  ApprovalRequestedSchema,
  GradeFailedSchema,
  GradeRequestedSchema,
  JudgeAnsweredSchema,
  JudgeRequestedSchema,
  GradeRecordedReceiptSchema,
  GradeRecordedSchema,
  KernelFactsSchema,
  PolicyDecidedReceiptSchema,
  PolicyDecidedSchema,
  RunCancelledSchema,
  RunCancelRequestedSchema,
  RunExecutedSchema,
  RunFailedSchema,
  RunRetriedSchema,
  RunRolledBackSchema,
  RunScheduledSchema,
  RunSealedReceiptSchema,
  RunSealedSchema,
  RunSubmittedSchema,
  SandboxCreatedSchema,
  SandboxDestroyedSchema,
  StepCompletedSchema,
  StepStartedSchema,
  VerificationCompletedReceiptSchema,
  VerificationCompletedSchema,
} from './run-events.schema.js';
import { type InputIssue, inputIssues } from './run-spec.schema.js';
import {
  SandboxExecCompletedSchema,
  SandboxExecStartedSchema,
  SandboxExpiredSchema,
  SandboxFileReadSchema,
  SandboxFileWrittenSchema,
  SandboxRequestedSchema,
} from './sandbox-events.schema.js';
import { AlertRaisedSchema, EgressDeniedSchema, SecretRedactedSchema } from './security-events.schema.js';

/** Every receipt type the evidence log may hold. A type not listed here stops the run (I-5). */
export const EVENT_TYPES = [
  'run.submitted',
  'policy.decided',
  'approval.requested',
  'approval.granted',
  'approval.rejected',
  'run.scheduled',
  'sandbox.created',
  'step.started',
  'step.completed',
  'sandbox.destroyed',
  'run.executed',
  'kernel.facts',
  'verification.completed',
  'judge.requested',
  'judge.answered',
  'grade.recorded',
  'grade.failed',
  'grade.requested',
  'run.failed',
  'run.retried',
  'run.rolled_back',
  'run.cancel_requested',
  'run.cancelled',
  'run.sealed',
  'sandbox.requested',
  'sandbox.exec.started',
  'sandbox.exec.completed',
  'sandbox.file.written',
  'sandbox.file.read',
  'sandbox.expired',
  'egress.denied',
  'secret.redacted',
  'alert.raised',
  'admin.tenant_created',
  'admin.key_created',
  'admin.key_rotated',
  'admin.key_revoked',
  'admin.policy_changed',
] as const;

export const EventTypeSchema = z.enum(EVENT_TYPES);
export type EventType = z.infer<typeof EventTypeSchema>;

/** The receipt types of a tenant's admin chain (`adm_<tenant>`); every other type lives on run and sandbox chains. */
export const ADMIN_EVENT_TYPES = ['admin.tenant_created', 'admin.key_created', 'admin.key_rotated', 'admin.key_revoked', 'admin.policy_changed'] as const satisfies readonly EventType[];

const KNOWN_TYPES: ReadonlySet<string> = new Set(EVENT_TYPES);
export function isEventType(type: string): type is EventType {
  return KNOWN_TYPES.has(type);
}

/** Body schema per type; `satisfies` makes the compiler check each schema carries its own type literal. */
export const EVENT_BODY_SCHEMAS = {
  'run.submitted': RunSubmittedSchema,
  'policy.decided': PolicyDecidedSchema,
  'approval.requested': ApprovalRequestedSchema,
  'approval.granted': ApprovalGrantedSchema,
  'approval.rejected': ApprovalRejectedSchema,
  'run.scheduled': RunScheduledSchema,
  'sandbox.created': SandboxCreatedSchema,
  'step.started': StepStartedSchema,
  'step.completed': StepCompletedSchema,
  'sandbox.destroyed': SandboxDestroyedSchema,
  'run.executed': RunExecutedSchema,
  'kernel.facts': KernelFactsSchema,
  'verification.completed': VerificationCompletedSchema,
  'judge.requested': JudgeRequestedSchema,
  'judge.answered': JudgeAnsweredSchema,
  'grade.recorded': GradeRecordedSchema,
  'grade.failed': GradeFailedSchema,
  'grade.requested': GradeRequestedSchema,
  'run.failed': RunFailedSchema,
  'run.retried': RunRetriedSchema,
  'run.rolled_back': RunRolledBackSchema,
  'run.cancel_requested': RunCancelRequestedSchema,
  'run.cancelled': RunCancelledSchema,
  'run.sealed': RunSealedSchema,
  'sandbox.requested': SandboxRequestedSchema,
  'sandbox.exec.started': SandboxExecStartedSchema,
  'sandbox.exec.completed': SandboxExecCompletedSchema,
  'sandbox.file.written': SandboxFileWrittenSchema,
  'sandbox.file.read': SandboxFileReadSchema,
  'sandbox.expired': SandboxExpiredSchema,
  'egress.denied': EgressDeniedSchema,
  'secret.redacted': SecretRedactedSchema,
  'alert.raised': AlertRaisedSchema,
  'admin.tenant_created': AdminTenantCreatedSchema,
  'admin.key_created': AdminKeyCreatedSchema,
  'admin.key_rotated': AdminKeyRotatedSchema,
  'admin.key_revoked': AdminKeyRevokedSchema,
  'admin.policy_changed': AdminPolicyChangedSchema,
} as const satisfies { [K in EventType]: z.ZodType<{ type: K }> };

/** Receipt schema per type: the body plus `prev_hash` and `hash`. */
export const EVENT_RECEIPT_SCHEMAS = {
  'run.submitted': receiptSchemaOf(RunSubmittedSchema),
  'policy.decided': PolicyDecidedReceiptSchema,
  'approval.requested': receiptSchemaOf(ApprovalRequestedSchema),
  'approval.granted': receiptSchemaOf(ApprovalGrantedSchema),
  'approval.rejected': receiptSchemaOf(ApprovalRejectedSchema),
  'run.scheduled': receiptSchemaOf(RunScheduledSchema),
  'sandbox.created': receiptSchemaOf(SandboxCreatedSchema),
  'step.started': receiptSchemaOf(StepStartedSchema),
  'step.completed': receiptSchemaOf(StepCompletedSchema),
  'sandbox.destroyed': receiptSchemaOf(SandboxDestroyedSchema),
  'run.executed': receiptSchemaOf(RunExecutedSchema),
  'kernel.facts': receiptSchemaOf(KernelFactsSchema),
  'verification.completed': VerificationCompletedReceiptSchema,
  'judge.requested': receiptSchemaOf(JudgeRequestedSchema),
  'judge.answered': receiptSchemaOf(JudgeAnsweredSchema),
  'grade.recorded': GradeRecordedReceiptSchema,
  'grade.failed': receiptSchemaOf(GradeFailedSchema),
  'grade.requested': receiptSchemaOf(GradeRequestedSchema),
  'run.failed': receiptSchemaOf(RunFailedSchema),
  'run.retried': receiptSchemaOf(RunRetriedSchema),
  'run.rolled_back': receiptSchemaOf(RunRolledBackSchema),
  'run.cancel_requested': receiptSchemaOf(RunCancelRequestedSchema),
  'run.cancelled': receiptSchemaOf(RunCancelledSchema),
  'run.sealed': RunSealedReceiptSchema,
  'sandbox.requested': receiptSchemaOf(SandboxRequestedSchema),
  'sandbox.exec.started': receiptSchemaOf(SandboxExecStartedSchema),
  'sandbox.exec.completed': receiptSchemaOf(SandboxExecCompletedSchema),
  'sandbox.file.written': receiptSchemaOf(SandboxFileWrittenSchema),
  'sandbox.file.read': receiptSchemaOf(SandboxFileReadSchema),
  'sandbox.expired': receiptSchemaOf(SandboxExpiredSchema),
  'egress.denied': receiptSchemaOf(EgressDeniedSchema),
  'secret.redacted': receiptSchemaOf(SecretRedactedSchema),
  'alert.raised': receiptSchemaOf(AlertRaisedSchema),
  'admin.tenant_created': receiptSchemaOf(AdminTenantCreatedSchema),
  'admin.key_created': receiptSchemaOf(AdminKeyCreatedSchema),
  'admin.key_rotated': receiptSchemaOf(AdminKeyRotatedSchema),
  'admin.key_revoked': receiptSchemaOf(AdminKeyRevokedSchema),
  'admin.policy_changed': receiptSchemaOf(AdminPolicyChangedSchema),
} as const satisfies { [K in EventType]: z.ZodType<{ type: K; prev_hash: string; hash: string }> };

const R = EVENT_RECEIPT_SCHEMAS;
const B = EVENT_BODY_SCHEMAS;

/** Any receipt body, discriminated on `type`. */
export const EvidenceEventSchema = z.discriminatedUnion('type', [
  B['run.submitted'],
  B['policy.decided'],
  B['approval.requested'],
  B['approval.granted'],
  B['approval.rejected'],
  B['run.scheduled'],
  B['sandbox.created'],
  B['step.started'],
  B['step.completed'],
  B['sandbox.destroyed'],
  B['run.executed'],
  B['kernel.facts'],
  B['verification.completed'],
  B['judge.requested'],
  B['judge.answered'],
  B['grade.recorded'],
  B['grade.failed'],
  B['grade.requested'],
  B['run.failed'],
  B['run.retried'],
  B['run.rolled_back'],
  B['run.cancel_requested'],
  B['run.cancelled'],
  B['run.sealed'],
  B['sandbox.requested'],
  B['sandbox.exec.started'],
  B['sandbox.exec.completed'],
  B['sandbox.file.written'],
  B['sandbox.file.read'],
  B['sandbox.expired'],
  B['egress.denied'],
  B['secret.redacted'],
  B['alert.raised'],
  B['admin.tenant_created'],
  B['admin.key_created'],
  B['admin.key_rotated'],
  B['admin.key_revoked'],
  B['admin.policy_changed'],
]);
export type EvidenceEvent = z.infer<typeof EvidenceEventSchema>;
export type EvidenceEventOf<T extends EventType> = Extract<EvidenceEvent, { type: T }>;

/** Any stored receipt: a body plus `prev_hash` and `hash`, discriminated on `type`. */
export const EvidenceReceiptSchema = z.discriminatedUnion('type', [
  R['run.submitted'],
  R['policy.decided'],
  R['approval.requested'],
  R['approval.granted'],
  R['approval.rejected'],
  R['run.scheduled'],
  R['sandbox.created'],
  R['step.started'],
  R['step.completed'],
  R['sandbox.destroyed'],
  R['run.executed'],
  R['kernel.facts'],
  R['verification.completed'],
  R['judge.requested'],
  R['judge.answered'],
  R['grade.recorded'],
  R['grade.failed'],
  R['grade.requested'],
  R['run.failed'],
  R['run.retried'],
  R['run.rolled_back'],
  R['run.cancel_requested'],
  R['run.cancelled'],
  R['run.sealed'],
  R['sandbox.requested'],
  R['sandbox.exec.started'],
  R['sandbox.exec.completed'],
  R['sandbox.file.written'],
  R['sandbox.file.read'],
  R['sandbox.expired'],
  R['egress.denied'],
  R['secret.redacted'],
  R['alert.raised'],
  R['admin.tenant_created'],
  R['admin.key_created'],
  R['admin.key_rotated'],
  R['admin.key_revoked'],
  R['admin.policy_changed'],
]);
export type EvidenceReceipt = z.infer<typeof EvidenceReceiptSchema>;
export type EvidenceReceiptOf<T extends EventType> = Extract<EvidenceReceipt, { type: T }>;

/** Why a stored receipt could not be read; the projector records it as the poison reason. */
export type ReceiptRejection = 'unknown_event_type' | 'invalid_fields';

export type ParseEvidenceReceiptResult =
  | { ok: true; receipt: EvidenceReceipt }
  | { ok: false; reason: ReceiptRejection; type: string | null; message: string; issues: InputIssue[] };

/**
 * Reads a stored receipt. An object whose `type` is a string Cairn does not know is
 * `unknown_event_type` (I-5); anything else that does not match its type's schema is `invalid_fields`.
 */
/** Results for frozen inputs, which cannot change: a chain read from memory is checked once per receipt. */
const checkedReceipts = new WeakMap<object, ParseEvidenceReceiptResult>();

export function parseEvidenceReceipt(input: unknown): ParseEvidenceReceiptResult {
  if (typeof input !== 'object' || input === null || !Object.isFrozen(input)) return checkReceipt(input);
  let result = checkedReceipts.get(input);
  if (result === undefined) {
    result = deepFreeze(checkReceipt(input));
    checkedReceipts.set(input, result);
  }
  return result;
}

function checkReceipt(input: unknown): ParseEvidenceReceiptResult {
  const type = typeof input === 'object' && input !== null && 'type' in input && typeof input.type === 'string' ? input.type : null;
  if (type === null) {
    const issues = [{ path: 'type', message: 'a receipt is an object with a string type' }];
    return { ok: false, reason: 'invalid_fields', type: null, message: 'type: a receipt is an object with a string type', issues };
  }
  if (!isEventType(type)) {
    const issues = [{ path: 'type', message: `unknown event type ${JSON.stringify(type)}` }];
    return { ok: false, reason: 'unknown_event_type', type, message: issues[0]!.message, issues };
  }
  // The type's own schema, not the union: its issues name the fields that are wrong.
  const result = EVENT_RECEIPT_SCHEMAS[type].safeParse(input);
  if (result.success) return { ok: true, receipt: result.data };
  const issues = inputIssues(result.error);
  const message = `invalid ${type} receipt: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`;
  return { ok: false, reason: 'invalid_fields', type, message, issues };
}
