import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, it, expect } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite/sqliteStore.js';
import { SCHEMA_VERSION } from '../../src/store/sqlite/schema.js';
import { LedgerUnavailableError } from '../../src/events/errors.js';
import type { Command } from '../../src/events/decide.js';
import { useTempDir } from '../support/tmp.js';

const submit = (fp = 'fp'): Command => ({ type: 'Submit', request: '{"guid":"g"}', fingerprint: fp, timeoutMs: 3000, maxAttempts: 3 });

describe.each(['inline', 'thread'] as const)('SQLite event store, writer %s', (writer) => {
  const tmp = useTempDir();
  const open = (extra: Partial<Parameters<typeof openSqliteStore>[0]> = {}) => openSqliteStore({ path: join(tmp(), 'l.db'), writer, ...extra });

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

  it('refuses a file from a newer guidgate', async () => {
    const path = join(tmp(), 'new.db');
    const raw = new Database(path);
    raw.pragma('user_version = 999');
    raw.close();
    expect(() => openSqliteStore({ path })).toThrow(/newer than this guidgate/);
  });

  it('the claim is one insert: of 50 concurrent Submits of one GUID exactly one wins', async () => {
    const store = open();
    const results = await Promise.all(Array.from({ length: 50 }, () => store.execute('g', submit())));
    expect(results.filter((r) => r.kind === 'applied')).toHaveLength(1);
    expect(results.filter((r) => r.kind === 'refused' && r.refusal.reason === 'exists')).toHaveLength(49);
    expect((await store.readStream('g')).map((e) => [e.seq, e.type])).toEqual([[0, 'Claimed'], [1, 'Sent']]);
    await store.close();
  });

  it('compare-and-set: an append at a stale seq loses, as a value, and nothing is written', async () => {
    const store = open();
    const first = await store.appendEvents('g', -1, [{ type: 'Claimed', at: 1, data: { request: 'r', fingerprint: 'f' } }]);
    expect(first.won).toBe(true);
    const again = await store.appendEvents('g', -1, [{ type: 'Claimed', at: 2, data: { request: 'r2', fingerprint: 'f2' } }]);
    expect(again).toEqual({ won: false, state: expect.objectContaining({ guid: 'g', lastSeq: 0, request: 'r' }) });
    const gap = await store.appendEvents('g', 5, [{ type: 'Sent', at: 3, data: { attempt: 1, timeoutMs: 1 } }]);
    expect(gap.won).toBe(false);
    const next = await store.appendEvents('g', 0, [{ type: 'Sent', at: 3, data: { attempt: 1, timeoutMs: 1 } }]);
    expect(next.won).toBe(true);
    expect(await store.readStream('g')).toHaveLength(2);
    await store.close();
  });

  it('the unique (guid, seq) key catches a writer whose projection is stale', async () => {
    const store = open();
    await store.execute('g', submit());
    // Make the projection lie about the last seq: the log's unique key must still refuse seq 1.
    store.db.prepare('UPDATE ledger SET last_seq = 0 WHERE guid = ?').run('g');
    const r = await store.appendEvents('g', 0, [{ type: 'Sent', at: 3, data: { attempt: 1, timeoutMs: 1 } }]);
    expect(r.won).toBe(false);
    expect(await store.readStream('g')).toHaveLength(2);
    await store.close();
  });

  it('a bad op in a shared batch fails alone; the others commit', async () => {
    const store = open();
    const [a, bad, b] = await Promise.allSettled([
      store.execute('a', submit()),
      // Sent before Claimed: evolve throws; only this append is undone.
      store.appendEvents('x', -1, [{ type: 'Sent', at: 1, data: { attempt: 1, timeoutMs: 1 } }]),
      store.execute('b', submit()),
    ]);
    expect(a.status).toBe('fulfilled');
    expect(bad.status).toBe('rejected');
    expect(b.status).toBe('fulfilled');
    expect((await store.queryLedger({})).map((r) => r.guid)).toEqual(['a', 'b']);
    await store.close();
  });

  it('an append of several events that meets a taken seq partway leaves none of its own events; the rest of the batch commits', async () => {
    const store = open();
    // A stray event at seq 1 with no seq 0 and no ledger row: Claimed (seq 0) goes in, Sent (seq 1) cannot.
    store.db.prepare("INSERT INTO events (guid, seq, type, at, data) VALUES ('x', 1, 'Sent', 1, '{\"attempt\":1,\"timeoutMs\":1}')").run();
    const [a, x, b] = await Promise.all([store.execute('a', submit()), store.execute('x', submit()), store.execute('b', submit())]);
    expect(a.kind).toBe('applied');
    expect(x.kind).toBe('refused');
    expect(b.kind).toBe('applied');
    expect((await store.readStream('x')).map((e) => [e.seq, e.type])).toEqual([[1, 'Sent']]);
    expect(await store.getLedger('x')).toBeNull();
    expect((await store.readStream('a')).map((e) => e.seq)).toEqual([0, 1]);
    await store.close();
  });

  it('an event SQLite could not store is refused before anything of its unit is written; the rest of the batch commits', async () => {
    const store = open();
    const [a, bad, b] = await Promise.allSettled([
      store.execute('a', submit()),
      store.appendEvents('x', -1, [{ type: 'Claimed', at: { not: 'a time' } as unknown as number, data: { request: 'r', fingerprint: 'f' } }]),
      store.execute('b', submit()),
    ]);
    expect([a.status, bad.status, b.status]).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await store.readStream('x')).toEqual([]);
    expect((await store.queryLedger({})).map((r) => r.guid)).toEqual(['a', 'b']);
    await store.close();
  });

  it('close() twice at once resolves both', async () => {
    const store = open();
    await store.execute('a', submit());
    await expect(Promise.all([store.close(), store.close()])).resolves.toBeDefined();
  });

  it('SQLite failing after a unit began writing fails the whole batch: nothing of any unit in it is durable', async () => {
    const store = open();
    // The events of 'boom' go in, then its ledger row is refused by SQLite itself.
    store.db.exec("CREATE TRIGGER boom BEFORE INSERT ON ledger WHEN NEW.guid = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END");
    const results = await Promise.allSettled([store.execute('a', submit()), store.execute('boom', submit()), store.execute('b', submit())]);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(LedgerUnavailableError);
    }
    expect(await store.readAll(-1, 100)).toEqual([]);
    expect(await store.queryLedger({})).toEqual([]);
    expect((await store.execute('a', submit())).kind).toBe('applied');
    await store.close();
  });

  it('a ledger locked by another process past the busy timeout rejects the whole batch as unavailable, writing nothing', async () => {
    const store = open({ busyTimeoutMs: 100 });
    const other = new Database(store.path);
    other.exec('BEGIN EXCLUSIVE');
    const results = await Promise.allSettled([store.execute('a', submit()), store.execute('b', submit())]);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(LedgerUnavailableError);
    }
    other.exec('ROLLBACK');
    other.close();
    expect(await store.queryLedger({})).toEqual([]);
    expect((await store.execute('a', submit())).kind).toBe('applied');
    await store.close();
  });

  it('rebuild reproduces the projection; verify finds a hand-corrupted row', async () => {
    const store = open();
    for (const g of ['a', 'b', 'c']) await store.execute(g, submit());
    await store.execute('a', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{"ok":1}', latencyMs: 3 });
    await store.execute('b', { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' });
    expect(await store.verifyProjection()).toEqual([]);
    store.db.prepare("UPDATE ledger SET status = 'FAILED', code = 'E902' WHERE guid = 'a'").run();
    store.db.prepare("DELETE FROM ledger WHERE guid = 'c'").run();
    const diffs = await store.verifyProjection();
    expect(diffs.map((d) => [d.guid, d.kind, d.columns])).toEqual([
      ['a', 'differs', ['status', 'code']],
      ['c', 'missing', []],
    ]);
    expect(await store.rebuildProjection()).toEqual({ rows: 3 });
    expect(await store.verifyProjection()).toEqual([]);
    expect((await store.getLedger('a'))?.status).toBe('DONE');
    await store.close();
  });

  it('rows read back are decoded, not cast: a hand-written bad status is an error, not a state', async () => {
    const store = open();
    await store.execute('a', submit());
    store.db.prepare("UPDATE ledger SET status = 'BOGUS' WHERE guid = 'a'").run();
    await expect(store.getLedger('a')).rejects.toThrow(/does not decode/);
    await store.close();
  });

  it('query by status, age and attempts', async () => {
    let now = 1000;
    const store = open({ clock: () => now });
    await store.execute('a', submit());
    now = 2000;
    await store.execute('b', submit());
    await store.execute('b', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' });
    expect((await store.queryLedger({ statuses: ['SENT'] })).map((r) => r.guid)).toEqual(['a']);
    expect((await store.queryLedger({ statuses: ['SENT', 'UNKNOWN'], updatedBefore: 2000 })).map((r) => r.guid)).toEqual(['a']);
    expect((await store.queryLedger({ sentAtOrBefore: 1999 })).map((r) => r.guid)).toEqual(['a']);
    expect(await store.countByStatus()).toMatchObject({ SENT: { count: 1, oldestUpdatedAt: 1000 }, UNKNOWN: { count: 1, oldestUpdatedAt: 2000 }, DONE: { count: 0, oldestUpdatedAt: null } });
    await store.close();
  });

  it('Purged takes the raw request and response out of the log too; the tombstone and a rebuild agree', async () => {
    let now = 1000;
    const store = open({ clock: () => now });
    await store.execute('a', { ...submit('fa'), request: '{"guid":"a","from":"ACC-SECRET"}' } as Command);
    await store.execute('a', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{"code":"0000","bal":42}', latencyMs: 3 });
    now = 5000;
    expect((await store.execute('a', { type: 'Purge', retentionMs: 1000 })).kind).toBe('applied');
    const raw = store.db.prepare("SELECT group_concat(data) AS d FROM events WHERE guid = 'a'").get() as { d: string };
    expect(raw.d).not.toContain('ACC-SECRET');
    expect(raw.d).not.toContain('bal');
    expect(await store.getLedger('a')).toMatchObject({ status: 'PURGED', code: '0000', fingerprint: 'fa', request: null, response: null, createdAt: 1000, updatedAt: 5000 });
    expect(await store.verifyProjection()).toEqual([]);
    expect(await store.removeTombstones(5000)).toBe(0);
    expect(await store.removeTombstones(5001)).toBe(1);
    expect(await store.readStream('a')).toEqual([]);
    expect(await store.getLedger('a')).toBeNull();
    await store.close();
  });

  it('reclaimSpace gives purged pages back to the file system', async () => {
    const store = open();
    const pad = 'p'.repeat(4000);
    for (let i = 0; i < 300; i++) await store.execute(`g${i}`, { ...submit(`f${i}`), request: `{"pad":"${pad}"}` } as Command);
    store.db.pragma('wal_checkpoint(TRUNCATE)');
    for (let i = 0; i < 300; i++) await store.execute(`g${i}`, { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{}', latencyMs: 1 });
    for (let i = 0; i < 300; i++) await store.execute(`g${i}`, { type: 'Purge', retentionMs: 0 });
    const { bytesBefore, bytesAfter } = await store.reclaimSpace();
    expect(bytesAfter).toBeLessThan(bytesBefore / 2);
    expect(await store.countLedger({ statuses: ['PURGED'] })).toBe(300);
    await store.close();
  });
});

describe('SQLite event store, writer thread: units that cannot cross to the writer', () => {
  const tmp = useTempDir();
  it('are rejected as unavailable, never left pending, and the writer keeps working', async () => {
    const store = openSqliteStore({ path: join(tmp(), 'l.db'), writer: 'thread' });
    const notPlainData = { request: 'r', fingerprint: 'f', callback: () => 1 } as unknown as { request: string; fingerprint: string };
    await expect(store.appendEvents('x', -1, [{ type: 'Claimed', at: 1, data: notPlainData }])).rejects.toBeInstanceOf(LedgerUnavailableError);
    expect((await store.execute('a', submit())).kind).toBe('applied');
    expect(await store.readStream('x')).toEqual([]);
    await store.close();
  });
});
