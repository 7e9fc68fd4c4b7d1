/** Injection tokens every Cairn service module provides. */
export const SERVICE_NAME = Symbol('cairn.service-name');
export const SERVICE_CONFIG = Symbol('cairn.service-config');
export const NATS_CONNECTION = Symbol('cairn.nats-connection');
export const EVIDENCE_LOG = Symbol('cairn.evidence-log');
export const SERVICE_LOGGER = Symbol('cairn.service-logger');
export const REACTOR_HANDLER = Symbol('cairn.reactor-handler');
