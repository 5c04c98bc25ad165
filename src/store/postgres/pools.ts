import pg from 'pg';
import { WRITE_DEADLINE_MARGIN_MS } from '../shared/writeDeadline.js';
import { rotatingPool, type HostRotation } from './hosts.js';

/** bigint columns (times in ms, counts, positions) as numbers; one beyond 2^53 stays a string and fails to decode. */
function parseInt8(text: string): number | string {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : text;
}
const INT8_OID = 20;
/** How the store's pools read values (bigint as numbers), for every connection that reads ledger rows. */
export const ledgerTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary' ? parseInt8 : pg.types.getTypeParser(oid, format as 'text')) as pg.CustomTypesConfig['getTypeParser'],
};

/** Session settings as a connection's startup `options` (`-c name=value`), each a whole number of ms. */
export const sessionSettings = (settings: Record<string, number>): string =>
  Object.entries(settings).map(([name, ms]) => `-c ${name}=${Math.max(0, Math.floor(ms))}`).join(' ');

/**
 * A pool of the store's: its connections to the writable primary among the URL's hosts (hosts.ts), bigint columns
 * as numbers, and a connection the server closes (restart,
 * pg_terminate_backend) dropped without ending the process. An idle one is dropped by the pool, which connects a
 * new one on the next query; for one in use, the query in flight rejects (and the batch with it), and the
 * client's own 'error' event, emitted beside that, must not end the process either.
 */
export function storePool(config: pg.PoolConfig, rotation: HostRotation): pg.Pool {
  const pool = rotatingPool({ ...config, types: ledgerTypes }, rotation);
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** One connection for a transaction; a connection that failed is closed, never handed out again. */
export async function withClient<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    const result = await fn(client);
    client.release();
    return result;
  } catch (err) {
    client.release(true);
    throw err;
  }
}

/**
 * The group commit's own sessions, bounded on the server, so that a batch ends by itself however it is stuck: a
 * statement (a lock wait, a slow disk) by statement_timeout, a transaction left open by a relay frozen or cut off
 * between two statements by idle_in_transaction_session_timeout (its row locks freed for the other relays), both
 * at the write deadline; and on this side a socket that stops answering (a partition, a reply held back) by
 * query_timeout, a margin later, after which the connection is closed, never reused (`release(true)`). A claim's
 * caller gives up sooner (its claim deadline); the check before COMMIT leaves its unit out (groupCommit.ts). Reads
 * and maintenance (rebuild, vacuum) use the other pool, without those limits.
 */
export function boundedWritePool(config: pg.PoolConfig, rotation: HostRotation, lockTimeoutMs: number, deadlineMs: number): pg.Pool {
  return storePool({
    ...config,
    // At least 1 ms each: 0 would switch the timeout off.
    options: sessionSettings({ lock_timeout: lockTimeoutMs, statement_timeout: Math.max(1, deadlineMs), idle_in_transaction_session_timeout: Math.max(1, deadlineMs) }),
    query_timeout: Math.floor(deadlineMs) + WRITE_DEADLINE_MARGIN_MS,
  }, rotation);
}

/** Connections of `rowReadPool`: the row reads of one turn of the event loop are one query, seldom more than one at once. */
const ROW_READ_CONNECTIONS = 2;

/**
 * The pool of the route's row reads (`GET_LEDGERS_SQL`, ledgerQueries.ts), whose sessions plan each prepared
 * statement once (`plan_cache_mode = force_generic_plan`). Left to choose, PostgreSQL plans a prepared statement
 * anew at every run as long as the plans of its first five runs looked cheaper than a generic one, which for the
 * row read depends on how many GUIDs those first reads carried: under `serveProfile.js --db`, one `serve` planned
 * it at 1,589 of its 1,944 runs (245 ms of the server's planning, more than the reads' 189 ms of execution),
 * another at 87 of 2,025 (pg_stat_statements with track_planning; docs/performance.md). That statement's generic
 * plan is an index lookup per GUID on a ledger of any size (test/int/postgresStore.int.spec.ts). Nothing else runs
 * here: the store's other statements keep the reads' pool, where PostgreSQL chooses their plans as before.
 */
export function rowReadPool(config: pg.PoolConfig, rotation: HostRotation, lockTimeoutMs: number): pg.Pool {
  return storePool({
    ...config,
    max: ROW_READ_CONNECTIONS,
    // `options` as the reads' pool has them, and the plan mode.
    options: `${sessionSettings({ lock_timeout: lockTimeoutMs })} -c plan_cache_mode=force_generic_plan`,
  }, rotation);
}
