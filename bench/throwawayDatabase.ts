/** A PostgreSQL database of a benchmark's own, on the server a URL names, dropped when the benchmark is done. */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

async function admin(serverUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Creates a database of a fresh name on the server of `serverUrl`; `url` names it, `drop` removes it. */
export async function throwawayDatabase(serverUrl: string, tag: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `guidgate_${tag}_${randomBytes(6).toString('hex')}`;
  await admin(serverUrl, `CREATE DATABASE ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
