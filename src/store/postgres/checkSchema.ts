import type pg from 'pg';
import { HostRotation } from './hosts.js';
import { storePool } from './pools.js';
import { parsePostgresUrl, PostgresUrlError } from './postgresUrl.js';
import { SCHEMA_VERSION } from './schema.js';

/** The tables a guidgate ledger on PostgreSQL has at this schema version (schema.ts' migrations create them). */
const TABLES = ['events', 'ledger', 'inquiry_schedule', 'requests', 'leases'] as const;

export interface PostgresSchemaCheck {
  readonly ok: boolean;
  readonly problems: readonly string[];
  /** The ledger's schema version (the migrations it has run); null when the database has none. */
  readonly schemaVersion: number | null;
  /** This guidgate's. */
  readonly expectedVersion: number;
  readonly tables: readonly string[];
}

/**
 * `guidgate check` on PostgreSQL, its first part: is this database a guidgate ledger at this guidgate's schema
 * version, with its tables? Reads only (one connection, no migration, unlike an open): a ledger an older guidgate
 * made is reported, not upgraded. The pages themselves are the server's to check (amcheck, its own tools). A
 * multi-host URL is read as every command reads it: the connection goes to the host that takes writes.
 */
export async function checkPostgresSchema(url: string): Promise<PostgresSchemaCheck> {
  const result = (problems: string[], schemaVersion: number | null, tables: string[] = []): PostgresSchemaCheck => ({
    ok: problems.length === 0, problems, schemaVersion, expectedVersion: SCHEMA_VERSION, tables,
  });
  let pool: pg.Pool;
  try {
    pool = storePool({ max: 1, connectionTimeoutMillis: 5000, application_name: 'guidgate check' }, new HostRotation(parsePostgresUrl(url).hosts));
  } catch (err) {
    if (err instanceof PostgresUrlError) return result([`bad PostgreSQL URL: ${err.message}`], null);
    return result([`cannot connect: ${err instanceof Error ? err.message : String(err)}`], null);
  }
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    await pool.end().catch(() => undefined);
    return result([`cannot connect: ${err instanceof Error ? err.message : String(err)}`], null);
  }
  try {
    const names = [...TABLES, 'schema_version'];
    const { rows } = await client.query<{ name: string; present: boolean }>(
      'SELECT name, to_regclass(name) IS NOT NULL AS present FROM unnest($1::text[]) AS name',
      [names],
    );
    const present = new Set(rows.filter((r) => r.present).map((r) => r.name));
    if (!present.has('schema_version')) return result(['no ledger in this database (no schema_version table; serve creates it)'], null);
    const version = (await client.query<{ v: number | null }>('SELECT max(version) AS v FROM schema_version')).rows[0]?.v ?? null;
    const problems: string[] = [];
    if (version === null || version < SCHEMA_VERSION) {
      problems.push(`schema version ${version ?? 0} is older than this guidgate's (${SCHEMA_VERSION}): serve (or any command that opens it) migrates it`);
    } else if (version > SCHEMA_VERSION) {
      problems.push(`schema version ${version} is newer than this guidgate's (${SCHEMA_VERSION}): upgrade guidgate`);
    }
    const missing = TABLES.filter((t) => !present.has(t));
    if (missing.length > 0 && problems.length === 0) problems.push(`tables missing at schema version ${version}: ${missing.join(', ')}`);
    return result(problems, version, TABLES.filter((t) => present.has(t)));
  } catch (err) {
    return result([`PostgreSQL: ${err instanceof Error ? err.message : String(err)}`], null);
  } finally {
    client.release();
    await pool.end().catch(() => undefined);
  }
}
