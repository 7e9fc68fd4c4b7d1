import type { SecretStore } from '@cairn/secret-store';

/** Injection token of the gateway's `GatewaySecrets`. */
export const GATEWAY_SECRET_STORE = Symbol('GATEWAY_SECRET_STORE');

/** The gateway's secret store; `store` is null when no key file is configured (the routes answer E_UNAVAILABLE). */
export interface GatewaySecrets {
  readonly store: SecretStore | null;
}
