import type { SecretCatalog } from '@cairn/secret-store';

/** Injection token of the gateway's `GatewaySecrets`. */
export const GATEWAY_SECRET_STORE = Symbol('GATEWAY_SECRET_STORE');

/** The gateway's secret catalog (ADR 0028); `store` is null when no public key file is configured (the routes answer E_UNAVAILABLE). */
export interface GatewaySecrets {
  readonly store: SecretCatalog | null;
}
