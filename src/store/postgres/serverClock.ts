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
 * BEGIN and the server's clock in one round trip (one simple query of two statements, no parameters): for a batch
 * that locks nothing before it decides, so that the time is read inside its transaction, before any of its writes.
 */
export async function beginAtServerTime(client: pg.ClientBase): Promise<number> {
  const results = (await client.query(`BEGIN; SELECT ${SERVER_NOW_MS} AS now`)) as unknown as Array<pg.QueryResult<{ now: number }>>;
  return results[1]!.rows[0]!.now;
}
