import { describe, expect, it } from 'vitest';
import { COMMAND_SCHEMAS, CommandOkSchema, DeleteWebhookCommandSchema, RegisterWebhookCommandSchema } from './commands.schema.js';

const webhookId = `wh_${'0a'.repeat(12)}`;
const register = {
  tenant: 'acme',
  requested_by: 'key:k1',
  webhook_id: webhookId,
  url: 'https://93.184.215.14/hook',
  events: ['run.*', 'alert.raised'],
  description: null,
  secret_sealed: Buffer.alloc(86, 7).toString('base64'),
  key_id: '0123456789abcdef',
  expires_at: '2026-12-03T12:00:00.000Z',
};

describe('webhook_register and webhook_delete', () => {
  it('are command verbs with strict payloads', () => {
    expect(COMMAND_SCHEMAS.webhook_register).toBe(RegisterWebhookCommandSchema);
    expect(COMMAND_SCHEMAS.webhook_delete).toBe(DeleteWebhookCommandSchema);
    expect(RegisterWebhookCommandSchema.safeParse(register).success).toBe(true);
    expect(RegisterWebhookCommandSchema.safeParse({ ...register, description: 'ops' }).success).toBe(true);
    expect(DeleteWebhookCommandSchema.safeParse({ tenant: 'acme', requested_by: 'key:k1', webhook_id: webhookId, expires_at: register.expires_at }).success).toBe(true);
  });

  it('have no place for a plaintext secret: an extra field is refused, and the sealed one is base64 only', () => {
    expect(RegisterWebhookCommandSchema.safeParse({ ...register, secret: 'whsec_plain' }).success).toBe(false);
    expect(RegisterWebhookCommandSchema.safeParse({ ...register, secret_sealed: 'whsec_not-base64!' }).success).toBe(false);
    expect(RegisterWebhookCommandSchema.safeParse({ ...register, secret_sealed: 'A'.repeat(2000) }).success).toBe(false);
    expect(RegisterWebhookCommandSchema.safeParse({ ...register, key_id: 'primary' }).success).toBe(false);
  });

  it('refuse what the REST body refuses: an empty filter, a bad id, a missing expiry', () => {
    expect(RegisterWebhookCommandSchema.safeParse({ ...register, events: [] }).success).toBe(false);
    expect(RegisterWebhookCommandSchema.safeParse({ ...register, webhook_id: 'wh_nope' }).success).toBe(false);
    const { expires_at: _expires, ...noExpiry } = register;
    expect(RegisterWebhookCommandSchema.safeParse(noExpiry).success).toBe(false);
    expect(DeleteWebhookCommandSchema.safeParse({ tenant: 'acme', requested_by: 'key:k1', webhook_id: webhookId }).success).toBe(false);
  });
});

describe('CommandOkSchema', () => {
  it('answers a chain id, or a webhook id for the webhook commands, and nothing else', () => {
    for (const runId of ['run_abc', 'sbx_abc', 'adm_acme', webhookId]) expect(CommandOkSchema.safeParse({ ok: true, run_id: runId, duplicate: false }).success, runId).toBe(true);
    for (const runId of ['wh_short', `dlv_${'0'.repeat(24)}`, '']) expect(CommandOkSchema.safeParse({ ok: true, run_id: runId, duplicate: false }).success, runId).toBe(false);
  });
});
