import {
  API_COMPONENTS,
  ApiKeyIdSchema,
  DeliveryIdSchema,
  IdempotencyKeySchema,
  KeyCreateSchema,
  KeyRevokeSchema,
  KeyRotateSchema,
  ListDeliveriesQuerySchema,
  ListKeysQuerySchema,
  SecretGranteeSchema,
  SecretGrantRequestSchema,
  SecretNameSchema,
  TenantCreateSchema,
  TenantIdSchema,
  WebhookCreateSchema,
  WebhookIdSchema,
  WorkerIdSchema,
} from '@cairn/contracts';
import type {
  DeliveryList,
  DeliveryView,
  EventPage,
  Health,
  KeyCreate,
  KeyCreated,
  KeyList,
  KeyView,
  ListDeliveriesQuery,
  PolicyInForce,
  ProofBundle,
  SealKeys,
  SecretDeleted,
  SecretGrants,
  SecretList,
  SecretStored,
  TenantList,
  TenantView,
  WebhookCreate,
  WebhookCreated,
  WebhookDeleted,
  WebhookList,
  Worker,
  WorkerList,
} from '@cairn/contracts';
import { encodeText } from './bytes.js';
import type { Chains, EventsOptions } from './chains.js';
import { checked, freshIdempotencyKey, signalOf } from './runs.js';
import { route } from './transport.js';
import type { Transport } from './transport.js';

/*
 * The tenant's administration over REST: secrets (write-only) and who may use them, API keys and
 * tenants (each act on the tenant's admin chain), webhooks, and the operator's views (workers,
 * policy, health). Arguments are checked against the contracts before anything is sent.
 */

const name = (value: string) => checked(SecretNameSchema, value, 'secret name');
const grantee = (value: string) => checked(SecretGranteeSchema, value, 'grantee');

export class Secrets {
  constructor(private readonly http: Transport) {}

  /**
   * Stores a secret (replacing an earlier value of that name): the value is sealed and never
   * returned. The key that sets it is granted it; `grant` grants it to more keys (`key:<id>`) or
   * scopes (`scope:<scope>`) in the same write.
   */
  async put(secret: string, value: string | Uint8Array, options: { grant?: readonly string[] } = {}): Promise<SecretStored> {
    // Its bounds are the gateway's to judge (E_INPUT, E_TOO_LARGE): the value is sent as it is.
    const bytes = typeof value === 'string' ? encodeText(value) : value;
    const { method, path } = route('putSecret', { name: name(secret) });
    return this.http.json(method, path, API_COMPONENTS.SecretStored, { text: bytes, query: { grant: (options.grant ?? []).map(grantee) } });
  }

  /** Names, last four characters, who set each and its grants: never a value. */
  async list(): Promise<SecretList> {
    const { method, path } = route('listSecrets');
    return this.http.json(method, path, API_COMPONENTS.SecretList);
  }

  async delete(secret: string): Promise<SecretDeleted> {
    const { method, path } = route('deleteSecret', { name: name(secret) });
    return this.http.json(method, path, API_COMPONENTS.SecretDeleted);
  }

  async grants(secret: string): Promise<SecretGrants> {
    const { method, path } = route('listSecretGrants', { name: name(secret) });
    return this.http.json(method, path, API_COMPONENTS.SecretGrants);
  }

  async grant(secret: string, grantees: readonly string[]): Promise<SecretGrants> {
    const body = checked(SecretGrantRequestSchema, { grantees: [...grantees] }, 'grant');
    const { method, path } = route('grantSecret', { name: name(secret) });
    return this.http.json(method, path, API_COMPONENTS.SecretGrants, { json: body });
  }

  async revoke(secret: string, who: string): Promise<SecretGrants> {
    const { method, path } = route('revokeSecretGrant', { name: name(secret), grantee: grantee(who) });
    return this.http.json(method, path, API_COMPONENTS.SecretGrants);
  }
}

const keyId = (value: string) => checked(ApiKeyIdSchema, value, 'key id');

export class Keys {
  constructor(private readonly http: Transport) {}

  /** A new key with `scopes`; its secret (`key`) is in this answer only. Retry-safe with the same `idempotencyKey`. */
  async create(key: KeyCreate, options: { idempotencyKey?: string } = {}): Promise<KeyCreated> {
    const body = checked(KeyCreateSchema, key, 'key');
    const idempotency = checked(IdempotencyKeySchema, options.idempotencyKey ?? freshIdempotencyKey(), 'Idempotency-Key');
    const { method, path } = route('createKey');
    return this.http.json(method, path, API_COMPONENTS.KeyCreated, { json: body, headers: { 'idempotency-key': idempotency } });
  }

  async list(query: { tenant?: string } = {}): Promise<KeyList> {
    const q = checked(ListKeysQuerySchema, query, 'key listing');
    const { method, path } = route('listKeys');
    return this.http.json(method, path, API_COMPONENTS.KeyList, { query: { ...q } });
  }

  /** A new secret for the same key; the old one works `graceSeconds` more (default 0). */
  async rotate(id: string, options: { graceSeconds?: number } = {}): Promise<KeyCreated> {
    const body = checked(KeyRotateSchema, options, 'rotation');
    const { method, path } = route('rotateKey', { id: keyId(id) });
    return this.http.json(method, path, API_COMPONENTS.KeyCreated, { json: body });
  }

  async revoke(id: string, options: { reason?: string } = {}): Promise<KeyView> {
    const body = checked(KeyRevokeSchema, options, 'revocation');
    const { method, path } = route('revokeKey', { id: keyId(id) });
    return this.http.json(method, path, API_COMPONENTS.Key, { json: body });
  }
}

const tenantId = (value: string) => checked(TenantIdSchema, value, 'tenant id');

export class Tenants {
  constructor(
    private readonly http: Transport,
    private readonly chains: Chains,
  ) {}

  /** The operator only: a tenant, its admin chain started; mint its first key with `keys.create({ tenant })`. */
  async create(id: string): Promise<TenantView> {
    const body = checked(TenantCreateSchema, { id }, 'tenant');
    const { method, path } = route('createTenant');
    return this.http.json(method, path, API_COMPONENTS.Tenant, { json: body });
  }

  async list(): Promise<TenantList> {
    const { method, path } = route('listTenants');
    return this.http.json(method, path, API_COMPONENTS.TenantList);
  }

  async get(id: string): Promise<TenantView> {
    const { method, path } = route('getTenant', { id: tenantId(id) });
    return this.http.json(method, path, API_COMPONENTS.Tenant);
  }

  /** The receipts of the tenant's admin chain (`adm_<id>`). */
  async events(id: string, options: EventsOptions = {}): Promise<EventPage> {
    return this.chains.events(`adm_${tenantId(id)}`, options);
  }

  async bundle(id: string): Promise<ProofBundle> {
    return this.chains.bundle(`adm_${tenantId(id)}`);
  }
}

const webhookId = (value: string) => checked(WebhookIdSchema, value, 'webhook id');

export class Webhooks {
  constructor(private readonly http: Transport) {}

  /** Registers a webhook; its signing secret is in this answer only. */
  async create(webhook: WebhookCreate): Promise<WebhookCreated> {
    const body = checked(WebhookCreateSchema, webhook, 'webhook');
    const { method, path } = route('createWebhook');
    return this.http.json(method, path, API_COMPONENTS.WebhookCreated, { json: body });
  }

  async list(): Promise<WebhookList> {
    const { method, path } = route('listWebhooks');
    return this.http.json(method, path, API_COMPONENTS.WebhookList);
  }

  async delete(id: string): Promise<WebhookDeleted> {
    const { method, path } = route('deleteWebhook', { id: webhookId(id) });
    return this.http.json(method, path, API_COMPONENTS.WebhookDeleted);
  }

  async deliveries(id: string, query: Partial<ListDeliveriesQuery> = {}): Promise<DeliveryList> {
    const q = checked(ListDeliveriesQuerySchema, query, 'delivery listing');
    const { method, path } = route('listWebhookDeliveries', { id: webhookId(id) });
    return this.http.json(method, path, API_COMPONENTS.DeliveryList, { query: { ...q } });
  }

  async replay(id: string, deliveryId: string): Promise<DeliveryView> {
    const { method, path } = route('replayWebhookDelivery', { id: webhookId(id), deliveryId: checked(DeliveryIdSchema, deliveryId, 'delivery id') });
    return this.http.json(method, path, API_COMPONENTS.Delivery);
  }
}

/** The operator's views: the stack's health, its workers, the policy in force, the seal keys. */
export class Operator {
  constructor(private readonly http: Transport) {}

  /** NATS, PostgreSQL and the services (a public route: no key needed). */
  async health(signal?: AbortSignal): Promise<Health> {
    const { method, path } = route('health');
    return this.http.json(method, path, API_COMPONENTS.Health, { timeoutMs: 5_000, ...signalOf(signal) });
  }

  async workers(): Promise<WorkerList> {
    const { method, path } = route('listWorkers');
    return this.http.json(method, path, API_COMPONENTS.WorkerList);
  }

  /** Drains a worker (the operator's): nothing new is placed on it; what it runs finishes. */
  async drainWorker(id: string): Promise<Worker> {
    const { method, path } = route('drainWorker', { id: checked(WorkerIdSchema, id, 'worker id') });
    return this.http.json(method, path, API_COMPONENTS.Worker);
  }

  /** Lifts an operator's drain: the worker takes new work again. */
  async undrainWorker(id: string): Promise<Worker> {
    const { method, path } = route('undrainWorker', { id: checked(WorkerIdSchema, id, 'worker id') });
    return this.http.json(method, path, API_COMPONENTS.Worker);
  }

  async policy(): Promise<PolicyInForce> {
    const { method, path } = route('getPolicy');
    return this.http.json(method, path, API_COMPONENTS.PolicyInForce);
  }

  /**
   * The deployment's seal verification keys (`<name>+<key id>+<base64>`), the current one first (a
   * public route). Pin one (`cairn verify --key`) rather than trusting what is fetched at verification time.
   */
  async sealKeys(signal?: AbortSignal): Promise<SealKeys> {
    const { method, path } = route('getSealKeys');
    return this.http.json(method, path, API_COMPONENTS.SealKeys, signalOf(signal));
  }

  /** What an operator watches, in the Prometheus text format, as scraped (a key with `metrics:read`; docs/metrics.md). */
  async metrics(signal?: AbortSignal): Promise<string> {
    const { method, path } = route('metrics');
    const response = await this.http.send(method, path, { accept: 'text/plain', ...signalOf(signal) });
    return response.text();
  }

  /** This API's own OpenAPI 3.1 document. */
  async openApi(): Promise<Record<string, unknown>> {
    const { method, path } = route('openApi');
    const response = await this.http.send(method, path);
    return (await response.json()) as Record<string, unknown>;
  }
}
