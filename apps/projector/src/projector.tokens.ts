/** Injection tokens of the projector's connections. */
export const PROJECTOR_CONNECTIONS = Symbol('PROJECTOR_CONNECTIONS');
export const EVIDENCE_CONSUMER = Symbol('EVIDENCE_CONSUMER');
