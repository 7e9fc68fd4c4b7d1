import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { authenticateApiKey } from './api-key.store.js';
import type { Principal } from './api-key.store.js';

/** The API key store as the guard uses it. */
@Injectable()
export class ApiKeyRepository {
  constructor(private readonly dataSource: DataSource) {}

  authenticate(presented: string | null): Promise<Principal> {
    return authenticateApiKey(this.dataSource, presented);
  }
}
