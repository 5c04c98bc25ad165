import { hostname } from 'node:os';
import { shownDbUrl } from '../shared/dbUrl.js';
import type { ProcessActor } from '../events/codecs.js';
import type { EventStore } from '../events/store.js';
import { ledgerProjection } from '../projections/ledgerProjection.js';
import { checkLedger as checkSqliteLedger, type LedgerCheck } from './sqlite/checkLedger.js';
import { isPostgresUrl, openPostgresStore } from './postgres/postgresStore.js';
import type { HostEvent } from './postgres/hosts.js';
import { continuityDirProblem } from './sqlite/continuityMark.js';
import { looseModeWarning } from './sqlite/ledgerFile.js';
import { openSqliteStore, type SqliteStoreOptions } from './sqlite/sqliteStore.js';

export type { LedgerCheck };

export type { Synchronous } from './sqlite/sqliteStore.js';

/** How a store is opened, whatever stands behind `--db`; a store ignores what does not apply to it. */
export type OpenStoreOptions = Omit<SqliteStoreOptions, 'path' | 'projection'> & {
  /**
   * False for every command but `serve` (CONTRACT.md §5): a database without a ledger is refused with
   * `LedgerMissingError`, nothing created. (A SQLite path is checked by the caller before opening.)
   */
  readonly create?: boolean;
  /** PostgreSQL: told when no listed host takes writes (once per outage) and when writes go to a host (hosts.ts). */
  readonly onHosts?: (event: HostEvent) => void;
};

export type { HostEvent };

/**
 * Opens the ledger named by `--db`: a PostgreSQL URL (`postgres://` or `postgresql://`, CONTRACT.md §4) or
 * else a SQLite file path. Async, so that a store whose opening needs the network can stand here.
 */
export async function openStore(db: string, options: OpenStoreOptions = {}): Promise<EventStore> {
  if (isPostgresUrl(db)) {
    // What applies to a server: the clock, the batch size, the busy timeout as the lock timeout, the claim deadline. The
    // file's durability (synchronous), writer thread and file watch are the server's or meaningless here.
    const { clock, maxBatch, busyTimeoutMs, create, actor, claimDeadlineMs, onHosts } = options;
    return openPostgresStore({
      url: db,
      projection: ledgerProjection,
      ...(actor === undefined ? {} : { actor }),
      ...(create === undefined ? {} : { create }),
      ...(clock === undefined ? {} : { clock }),
      ...(maxBatch === undefined ? {} : { maxBatch }),
      ...(busyTimeoutMs === undefined ? {} : { lockTimeoutMs: busyTimeoutMs }),
      ...(claimDeadlineMs === undefined ? {} : { claimDeadlineMs }),
      ...(onHosts === undefined ? {} : { onHosts }),
    });
  }
  const { create: _create, onHosts: _onHosts, ...sqlite } = options;
  return openSqliteStore({ path: db, projection: ledgerProjection, ...sqlite });
}

/** The process part of every event this process writes: `by` is the command (`serve`, `resolve`, `purge`, …). */
export function processActor(by: string): ProcessActor {
  return { by, host: hostname(), pid: process.pid };
}

/**
 * `guidgate check` and `serve --check`: the full integrity check of a ledger file (SQLite). On PostgreSQL `check`
 * checks what a client can (src/cli/check.ts: the schema, then the projection against the log); the pages are the
 * server's to check (amcheck). Here a URL is reported as nothing to check, ok.
 */
export function checkLedger(db: string): LedgerCheck {
  if (isPostgresUrl(db)) return { path: db, ok: true, problems: [], quickCheckMs: null };
  return checkSqliteLedger(db);
}

/** Which store `--db` names. */
export const storeKind = (db: string): 'sqlite' | 'postgres' => (isPostgresUrl(db) ? 'postgres' : 'sqlite');

/** What an operator should hear about the ledger before serving from it (a file others can read), or null. */
export function ledgerWarning(db: string): string | null {
  return isPostgresUrl(db) ? null : looseModeWarning(db);
}

/** What an operator should hear about where the continuity marks are (SQLite: not inside the data directory), or null. */
export function continuityWarning(db: string, continuityDir: string | undefined): string | null {
  return isPostgresUrl(db) || db === ':memory:' ? null : continuityDirProblem(db, continuityDir);
}

/**
 * `--db` as it may be shown (messages, logs): a URL's password replaced by `***` (the user info ends at the last
 * `@`, so a password holding `/`, `#`, `?` or `@` is masked whole), and a host list that does not parse not shown.
 */
export function shownDb(db: string): string {
  return isPostgresUrl(db) ? (shownDbUrl(db) ?? '(a URL that does not parse)') : db;
}
