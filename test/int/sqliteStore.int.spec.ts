import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, it, expect } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite/sqliteStore.js';
import { SCHEMA_VERSION } from '../../src/store/sqlite/schema.js';
import type { Command } from '../../src/events/decide.js';
import { useTempDir } from '../support/tmp.js';
import { orThrow } from '../../src/events/storeResult.js';
import { expectLeft } from '../support/storeResult.js';
import * as E from 'fp-ts/lib/Either.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';

const submit = (fp = 'fp'): Command => ({ type: 'Submit', request: '{"guid":"g"}', fingerprint: fp, timeoutMs: 3000, maxAttempts: 3 });

/** What only a SQLite ledger does; everything the store contract promises is in test/conformance. */
describe.each(['inline', 'thread'] as const)('SQLite event store, writer %s', (writer) => {
  const tmp = useTempDir();
  const open = (extra: Partial<Parameters<typeof openSqliteStore>[0]> = {}) => openSqliteStore({ projection: ledgerProjection, path: join(tmp(), 'l.db'), writer, ...extra });

  it('opens a new file with WAL, synchronous=FULL and the current schema version', async () => {
    const store = open();
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(store.db.pragma('synchronous', { simple: true })).toBe(2); // FULL
    expect(store.db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(store.db.pragma('auto_vacuum', { simple: true })).toBe(2); // INCREMENTAL
    await store.close();
    const normal = open({ synchronous: 'NORMAL' });
    expect(normal.db.pragma('synchronous', { simple: true })).toBe(1);
    await normal.close();
  });

  it('indexes only what is searched: one partial index over the unsettled states, used by the queries for them, and the rows found are the right ones', async () => {
    const store = open();
    const indexes = (store.db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ledger' AND sql IS NOT NULL ORDER BY name").all() as Array<{ name: string }>).map((r) => r.name);
    expect(indexes).toEqual(['ledger_status_updated', 'ledger_unsettled']);
    await orThrow(store.execute('u', submit()));
    await orThrow(store.execute('u', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
    await orThrow(store.execute('d', submit()));
    await orThrow(store.execute('d', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{}', latencyMs: 1 }));
    await orThrow(store.execute('s', submit()));
    const plans: string[] = [];
    const prepare = store.db.prepare.bind(store.db);
    store.db.prepare = ((sql: string) => {
      if (sql.startsWith('SELECT')) plans.push((prepare(`EXPLAIN QUERY PLAN ${sql}`).all({ s0: 'x', s1: 'x', sentAtOrBefore: 0 }) as Array<{ detail: string }>).map((r) => r.detail).join('; '));
      return prepare(sql);
    }) as typeof store.db.prepare;
    try {
      expect((await orThrow(store.queryLedger({ statuses: ['UNKNOWN'], sentAtOrBefore: Date.now() + 1 }))).map((r) => r.guid)).toEqual(['u']);
      expect(plans.pop()).toContain('USING INDEX ledger_unsettled');
      expect((await orThrow(store.queryLedger({ statuses: ['DONE', 'SENT'] }))).map((r) => r.guid)).toEqual(['d', 's']);
      expect(plans.pop()).not.toContain('ledger_unsettled'); // DONE is not in it
    } finally {
      store.db.prepare = prepare;
      await store.close();
    }
  });

  it('refuses a file from a newer guidgate', async () => {
    const path = join(tmp(), 'new.db');
    const raw = new Database(path);
    raw.pragma('user_version = 999');
    raw.close();
    expect(() => openSqliteStore({ projection: ledgerProjection, path })).toThrow(/newer than this guidgate/);
  });

  it('an event SQLite could not store is refused before anything of its unit is written; the rest of the batch commits', async () => {
    const store = open();
    const [a, , b] = await Promise.all([
      store.execute('a', submit()),
      expectLeft(store.appendEvents('x', -1, [{ type: 'Claimed', at: { not: 'a time' } as unknown as number, data: { request: 'r', fingerprint: 'f' } }]), 'LEDGER_UNAVAILABLE', /event Claimed has no valid time/),
      store.execute('b', submit()),
    ]);
    expect([E.isRight(a), E.isRight(b)]).toEqual([true, true]);
    expect(await orThrow(store.readStream('x'))).toEqual([]);
    expect((await orThrow(store.queryLedger({}))).map((r) => r.guid)).toEqual(['a', 'b']);
    await store.close();
  });

  it('a ledger locked by another process past the busy timeout rejects the whole batch as unavailable, writing nothing', async () => {
    const store = open({ busyTimeoutMs: 100 });
    const other = new Database(store.path);
    other.exec('BEGIN EXCLUSIVE');
    await Promise.all([expectLeft(store.execute('a', submit()), 'LEDGER_UNAVAILABLE'), expectLeft(store.execute('b', submit()), 'LEDGER_UNAVAILABLE')]);
    other.exec('ROLLBACK');
    other.close();
    expect(await orThrow(store.queryLedger({}))).toEqual([]);
    expect((await orThrow(store.execute('a', submit()))).kind).toBe('applied');
    await store.close();
  });

  it('reclaimSpace gives purged pages back to the file system', async () => {
    const store = open();
    const pad = 'p'.repeat(4000);
    for (let i = 0; i < 300; i++) await orThrow(store.execute(`g${i}`, { ...submit(`f${i}`), request: `{"pad":"${pad}"}` } as Command));
    store.db.pragma('wal_checkpoint(TRUNCATE)');
    for (let i = 0; i < 300; i++) await orThrow(store.execute(`g${i}`, { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{}', latencyMs: 1 }));
    for (let i = 0; i < 300; i++) await orThrow(store.execute(`g${i}`, { type: 'Purge', retentionMs: 0 }));
    const { bytesBefore, bytesAfter } = await orThrow(store.reclaimSpace());
    expect(bytesAfter).toBeLessThan(bytesBefore / 2);
    expect(await orThrow(store.countLedger({ statuses: ['PURGED'] }))).toBe(300);
    await store.close();
  });
});

describe('SQLite event store, writer thread: units that cannot cross to the writer', () => {
  const tmp = useTempDir();
  it('are rejected as unavailable, never left pending, and the writer keeps working', async () => {
    const store = openSqliteStore({ projection: ledgerProjection, path: join(tmp(), 'l.db'), writer: 'thread' });
    const notPlainData = { request: 'r', fingerprint: 'f', callback: () => 1 } as unknown as { request: string; fingerprint: string };
    await expectLeft(store.appendEvents('x', -1, [{ type: 'Claimed', at: 1, data: notPlainData }]), 'LEDGER_UNAVAILABLE');
    expect((await orThrow(store.execute('a', submit()))).kind).toBe('applied');
    expect(await orThrow(store.readStream('x'))).toEqual([]);
    await store.close();
  });
});
