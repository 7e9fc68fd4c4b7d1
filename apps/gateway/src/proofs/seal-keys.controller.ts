import { API_ROUTES, SealKeysSchema } from '@cairn/contracts';
import type { SealKeys } from '@cairn/contracts';
import { readPublicKeysFile } from '@cairn/secret-store';
import { keyIdHex } from '@cairn/transparency';
import { Controller, Inject } from '@nestjs/common';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG } from '../gateway.tokens.js';
import { ApiRoute } from '../http/api-route.decorator.js';

/**
 * `/.well-known/cairn/keys`: the deployment's seal verification keys, the current one first and
 * every retired one after it (rotation keeps old seals verifiable). Public, like any public key;
 * read from the public keys file on each request, so a rotation shows without a restart.
 */
@Controller()
export class SealKeysController {
  constructor(@Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig) {}

  @ApiRoute(API_ROUTES.getSealKeys)
  async list(): Promise<SealKeys> {
    const path = this.config.CAIRN_SEAL_PUBLIC_KEYS_FILE;
    if (path === undefined) return { keys: [] };
    const published = await readPublicKeysFile(path);
    return SealKeysSchema.parse({
      keys: published.map((k) => ({ key: k.key, name: k.verifier.name, keyId: keyIdHex(k.verifier.keyId), status: k.status })),
    });
  }
}
