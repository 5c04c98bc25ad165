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
