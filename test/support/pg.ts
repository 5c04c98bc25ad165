import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';

/** The server the PostgreSQL tests use: any database on it the user may CREATE DATABASE from. */
export const PG_ADMIN_URL = process.env['GUIDGATE_TEST_PG'] ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** The URL without its password, for messages. */
const shown = (url: string) => url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');

async function reachable(): Promise<string | null> {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Whether the PostgreSQL tests can run here. Under CI (`CI=true`) a missing server is a failure, never a
 * skip; elsewhere the tests are skipped with a message that says how to run them.
 */
export async function postgresForTests(): Promise<{ available: boolean }> {
  const why = await reachable();
  if (why === null) return { available: true };
  const message = `no PostgreSQL at ${shown(PG_ADMIN_URL)} (${why})`;
  if (process.env['CI'] === 'true') throw new Error(`${message}; CI needs it: start it with \`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\``);
  console.warn(`PostgreSQL tests skipped: ${message}. To run them, start PostgreSQL or set GUIDGATE_TEST_PG=postgres://user@host:port/db (a user that may CREATE DATABASE).`);
  return { available: false };
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Runs `fn` on a connection of its own to the test server's admin database, closed afterwards. */
export async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/**
 * Throwaway databases for one test file: `url()` is the file's own database (created in beforeAll),
 * `fresh()` makes another empty one; all are dropped in afterAll, whoever is still connected.
 */
export function useTestDatabases(): { url(): string; fresh(): Promise<string>; reset(): Promise<void> } {
  const names: string[] = [];
  const create = async () => {
    const name = `guidgate_test_${randomBytes(6).toString('hex')}`;
    await admin((c) => c.query(`CREATE DATABASE ${name}`));
    names.push(name);
    return withDatabase(PG_ADMIN_URL, name);
  };
  let main: string | null = null;
  beforeAll(async () => {
    main = await create();
  });
  afterAll(async () => {
    await admin(async (c) => {
      for (const name of names.splice(0)) await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    });
  });
  return {
    url() {
      if (main === null) throw new Error('the test database is created in beforeAll');
      return main;
    },
    fresh: create,
    /**
     * Empties every table of the file's database between tests (the schema and its version stay). The tables
     * are read from the database, so a table a later migration adds is emptied too.
     */
    async reset() {
      const client = new pg.Client({ connectionString: this.url() });
      await client.connect();
      try {
        const { rows } = await client.query<{ name: string }>(
          "SELECT quote_ident(tablename) AS name FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'schema_version'",
        );
        if (rows.length > 0) await client.query(`TRUNCATE ${rows.map((r) => r.name).join(', ')} RESTART IDENTITY`);
      } finally {
        await client.end();
      }
    },
  };
}
