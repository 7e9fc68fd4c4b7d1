import { adminChainId, CairnError } from '@cairn/contracts';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { KeyedSerialQueue } from '@cairn/evidence-log';
import type { EvidenceLog } from '@cairn/evidence-log';
import { decideAdmin, foldAdminChain } from '@cairn/lifecycle';
import type { AdminCommand } from '@cairn/lifecycle';
import type { CommandOk, CreateKeyCommand, CreateTenantCommand, RevokeKeyCommand, RotateKeyCommand } from '@cairn/operational';
import { EVIDENCE_LOG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { checkEventFields } from './event-fields.check.js';
import { decideOnStableHead } from './run-command.chain.js';
import { INTAKE_ACTOR } from './submit-run.handler.js';

/**
 * `cairn.cmd.tenant_create|key_create|key_rotate|key_revoke` (docs/adr/0011): an admin act, recorded
 * on the tenant's admin chain `adm_<tenant>`. Decided from the chain itself (`decideAdmin`), so a
 * command that is on the chain already — redelivered, retried by the gateway, however late — is a
 * duplicate and stores nothing; appended guarded on the head it was decided from. One tenant's acts
 * are taken one at a time here (an admin chain is written only by intake), so a burst of them does
 * not race itself into head-moved conflicts; another intake in between is read again.
 */
@Injectable()
export class AdminCommandHandler {
  private readonly perChain = new KeyedSerialQueue();

  constructor(@Inject(EVIDENCE_LOG) private readonly log: EvidenceLog) {}

  createTenant(command: CreateTenantCommand): Promise<Omit<CommandOk, 'ok'>> {
    return this.record(command.tenant, { kind: 'tenant_create', by: command.requested_by });
  }

  createKey(command: CreateKeyCommand): Promise<Omit<CommandOk, 'ok'>> {
    return this.record(command.tenant, {
      kind: 'key_create',
      by: command.requested_by,
      keyId: command.key_id,
      prefix: command.prefix,
      scopes: command.scopes,
      expiresAt: command.expires_at,
    });
  }

  rotateKey(command: RotateKeyCommand): Promise<Omit<CommandOk, 'ok'>> {
    return this.record(command.tenant, { kind: 'key_rotate', by: command.requested_by, keyId: command.key_id, rotation: command.rotation, graceUntil: command.grace_until });
  }

  revokeKey(command: RevokeKeyCommand): Promise<Omit<CommandOk, 'ok'>> {
    return this.record(command.tenant, {
      kind: 'key_revoke',
      by: command.requested_by,
      keyId: command.key_id,
      ...(command.reason === undefined ? {} : { reason: command.reason }),
    });
  }

  private record(tenant: string, command: AdminCommand): Promise<Omit<CommandOk, 'ok'>> {
    const chainId = adminChainId(tenant);
    return this.perChain.run(chainId, () => this.decideAndAppend(tenant, chainId, command));
  }

  private decideAndAppend(tenant: string, chainId: string, command: AdminCommand): Promise<Omit<CommandOk, 'ok'>> {
    return decideOnStableHead(async () => {
      const stored: ReceiptEnvelope[] = [];
      for await (const receipt of this.log.readChain(chainId)) stored.push(receipt.receipt);
      const view = foldAdminChain(tenant, stored);
      const decision = decideAdmin(view, command);
      switch (decision.kind) {
        case 'duplicate':
          return { run_id: chainId, duplicate: true };
        case 'refuse':
          throw new CairnError(decision.code, decision.message, { chainId });
        case 'append': {
          const envelope = { type: decision.type, actor: INTAKE_ACTOR, tenant, causation: decision.causation };
          checkEventFields(decision.type, { chainId, tenant, actor: INTAKE_ACTOR, causation: decision.causation }, decision.fields);
          const appended = await this.log.append(
            chainId,
            { ...envelope, ...(decision.key === undefined ? {} : { key: decision.key }), fields: decision.fields },
            { expectedHeadSeq: view.headSeq },
          );
          return { run_id: chainId, duplicate: appended.duplicate };
        }
      }
    });
  }
}
