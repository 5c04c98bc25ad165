import type pg from 'pg';

/**
 * The database server's clock in ms since the epoch, as an SQL expression, read when the statement runs
 * (`clock_timestamp()`, not the transaction's start: a transaction that waited for a row lock reads a time after the
 * writer it waited for). Every time the PostgreSQL store stamps or judges comes from here.
 */
export const SERVER_NOW_MS = 'floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint';

/** The database server's clock (`SERVER_NOW_MS`), read now. */
export async function serverNow(db: pg.Pool | pg.ClientBase): Promise<number> {
  const { rows } = await db.query<{ now: number }>({ name: 'guidgate_now', text: `SELECT ${SERVER_NOW_MS} AS now` });
  return rows[0]!.now;
}

/**
 * What a write transaction begins with. Every statement of it finds rows by their key (a GUID, a (guid, seq)), so
 * no sequential scan: the group commit's statements are prepared once per connection, and PostgreSQL keeps the
 * generic plan it made at their sixth run until the tables are next analyzed. Made while the tables were nearly
 * empty (a new database; autovacuum first analyzes them up to a minute later), that plan scanned the whole ledger
 * in every batch (bench/writePath.ts on a new database: 533 scans of up to 5,000 rows in 10 s, 4 ms each).
 */
export const BEGIN_WRITE = 'BEGIN; SET LOCAL enable_seqscan = off';

/**
 * `BEGIN_WRITE` and the server's clock in one round trip (one simple query, no parameters): for a batch that locks
 * nothing before it decides, so that the time is read inside its transaction, before any of its writes.
 */
export async function beginAtServerTime(client: pg.ClientBase): Promise<number> {
  const results = (await client.query(`${BEGIN_WRITE}; SELECT ${SERVER_NOW_MS} AS now`)) as unknown as Array<pg.QueryResult<{ now: number }>>;
  return results[2]!.rows[0]!.now;
}
