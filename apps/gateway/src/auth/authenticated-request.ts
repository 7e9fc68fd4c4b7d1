import type { FastifyRequest } from 'fastify';
import type { Principal } from './api-key.store.js';

/** A request whose key the guard verified. */
export type AuthenticatedRequest = FastifyRequest & { principal?: Principal };
