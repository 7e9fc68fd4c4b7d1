/** Injection token of the gateway's `SandboxSessions` (opened and closed by `startGateway`). */
export const GATEWAY_SANDBOX_SESSIONS = Symbol('GATEWAY_SANDBOX_SESSIONS');
