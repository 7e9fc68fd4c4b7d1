/** Injection tokens of the projector's connections. */
export const PROJECTOR_CONNECTIONS = Symbol('PROJECTOR_CONNECTIONS');
export const EVIDENCE_CONSUMER = Symbol('EVIDENCE_CONSUMER');
/** The evidence log as the projector reads it back to fill a hole (`ProjectionSource`). */
export const EVIDENCE_SOURCE = Symbol('EVIDENCE_SOURCE');
