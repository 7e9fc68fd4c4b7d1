/** Injection token of the gateway's `GatewayConfig`. */
export const GATEWAY_CONFIG = Symbol('GATEWAY_CONFIG');
/** Injection token of the gateway's NATS connection (owned by `startGateway`). */
export const GATEWAY_NATS = Symbol('GATEWAY_NATS');
