import type { DataSource } from 'typeorm';

export interface SchemaCheck {
  matches: boolean;
  /** The DDL TypeORM would run to make the database match the entities; empty when it matches. */
  differences: string[];
}

/**
 * Compares the migrated schema with the entities: TypeORM's schema builder lists what it would
 * change (without changing anything). Triggers and functions are not entity metadata and are
 * not compared; the integration tests check those.
 */
export async function checkSchemaMatchesEntities(dataSource: DataSource): Promise<SchemaCheck> {
  const sql = await dataSource.driver.createSchemaBuilder().log();
  const differences = sql.upQueries.map((query) => query.query);
  return { matches: differences.length === 0, differences };
}
