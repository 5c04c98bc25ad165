import { realpathSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, it, expect } from 'vitest';
import { openSqliteStore, type SqliteEventStore } from '../../src/store/sqlite/sqliteStore.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';
import { openLedger, type LedgerOptions } from '../support/ledgerStore.js';
import { walSync, type WalSync } from '../../src/store/sqlite/walSync.js';
import { logPosition as logPositionOf } from '../../src/store/sqlite/continuityMark.js';
import { oneReadTransaction } from '../../src/store/sqlite/readMethods.js';
import { SCHEMA_VERSION } from '../../src/store/sqlite/schema.js';
import type { Command } from '../../src/events/decide.js';
import type { LedgerState } from '../../src/events/state.js';
import { useTempDir } from '../support/tmp.js';
import { sleep, waitFor } from '../support/waitFor.js';
import { orThrow } from '../../src/events/storeResult.js';
import { expectLeft } from '../support/storeResult.js';

const submit = (fp = 'fp'): Command => ({ type: 'Submit', request: '{"guid":"g"}', fingerprint: fp, timeoutMs: 3000, maxAttempts: 3 });

/** What only a SQLite ledger does; everything the store contract promises is in test/conformance. */
describe.each(['inline', 'thread'] as const)('SQLite event store, writer %s', (writer) => {
  const tmp = useTempDir();
  const open = (extra: LedgerOptions = {}) => openLedger(join(tmp(), 'l.db'), { writer, ...extra });

  it('opens a new file with WAL, synchronous=FULL and the current schema version', async () => {
    const store = open();
    expect(store.db.pragma('journal_mode', { simple: true })).toBe('wal');
    // FULL: the thread's connection syncs in its COMMIT; the inline writer commits at NORMAL and syncs the WAL itself (walSync.ts).
    expect(store.db.pragma('synchronous', { simple: true })).toBe(writer === 'thread' ? 2 : 1);
    expect(store.db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(store.db.pragma('auto_vacuum', { simple: true })).toBe(2); // INCREMENTAL
    // A 4 MB page cache, not better-sqlite3's 16 MB: a commit after a B-tree split walks all of it (openDatabase.ts).
    expect(store.db.pragma('cache_size', { simple: true })).toBe(-4000);
    await store.close();
    const normal = open({ synchronous: 'NORMAL' });
    expect(normal.db.pragma('synchronous', { simple: true })).toBe(1);
    await normal.close();
  });

  it('the row reads of one turn of the event loop are made together at the start of the next, each call given its own row; a row that does not decode fails its own caller only', async () => {
    const store = open();
    await orThrow(store.execute('g1', submit()));
    await orThrow(store.execute('g2', submit('fp2')));
    const calls = [store.getLedger('g1'), store.getLedger('g2'), store.getLedger('g1'), store.getLedger('absent')];
    // Changed in the same turn, after the calls: what they read is the row as it is then, not yet read.
    store.db.prepare("UPDATE ledger SET fingerprint = 'changed' WHERE guid = 'g2'").run();
    const [a, b, again, none] = await Promise.all(calls.map(orThrow));
    expect([a?.guid, a?.fingerprint, b?.guid, b?.fingerprint, again?.guid, none]).toEqual(['g1', 'fp', 'g2', 'changed', 'g1', null]);
    store.db.prepare("UPDATE ledger SET status = 'NOT-A-STATUS' WHERE guid = 'g2'").run();
    const [good, bad] = [store.getLedger('g1'), store.getLedger('g2')];
    expect((await orThrow(good))?.guid).toBe('g1');
    await expectLeft(bad, 'LEDGER_CORRUPT');
    await store.close();
  });

  it("the row reads of one turn are one read transaction (one snapshot, one read lock), closed before the turn's reads are answered", async () => {
    const path = join(tmp(), 'l.db');
    const other = new Database(path);
    // A projection that, while decoding g1's row, has another connection commit a change to g2's: a read of g2
    // in a transaction of its own would see it, one in the same read transaction as g1's does not.
    const store = openSqliteStore({
      writer,
      path,
      projection: {
        ...ledgerProjection,
        rowToState: (row) => {
          if ((row as { guid?: unknown }).guid === 'g1') other.prepare("UPDATE ledger SET fingerprint = 'changed' WHERE guid = 'g2'").run();
          return ledgerProjection.rowToState(row);
        },
      },
    });
    try {
      await orThrow(store.execute('g1', submit()));
      await orThrow(store.execute('g2', submit('fp2')));
      const [a, b] = await Promise.all([store.getLedger('g1'), store.getLedger('g2')].map(orThrow));
      expect([a?.fingerprint, b?.fingerprint]).toEqual(['fp', 'fp2']);
      // The transaction is closed: the writer's next BEGIN IMMEDIATE works, and the next turn reads the change.
      expect(store.db.inTransaction).toBe(false);
      await orThrow(store.execute('g3', submit()));
      expect((await orThrow(store.getLedger('g2')))?.fingerprint).toBe('changed');
    } finally {
      await store.close();
      other.close();
    }
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

});

describe('SQLite event store, writer thread: units that cannot cross to the writer', () => {
  const tmp = useTempDir();
  it('are rejected as unavailable, never left pending, and the writer keeps working', async () => {
    const store = openLedger(join(tmp(), 'l.db'), { writer: 'thread' });
    const notPlainData = { request: 'r', fingerprint: 'f', callback: () => 1 } as unknown as { request: string; fingerprint: string };
    await expectLeft(store.appendEvents('x', -1, [{ type: 'Claimed', at: 1, data: notPlainData }]), 'LEDGER_UNAVAILABLE');
    expect((await orThrow(store.execute('a', submit()))).kind).toBe('applied');
    expect(await orThrow(store.readStream('x'))).toEqual([]);
    await store.close();
  });
});

describe('the row reads\' read transaction (oneReadTransaction)', () => {
  const tmp = useTempDir();
  it('gives the reads\' results back and throws nothing when its BEGIN or its COMMIT fails; joins a transaction already open', () => {
    const db = new Database(join(tmp(), 'r.db'));
    try {
      db.exec('CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2)');
      const together = oneReadTransaction(db);
      // A statement still running when the reads end: COMMIT (and ROLLBACK) cannot run. Nothing the store reads does this.
      const select = db.prepare('SELECT x FROM t');
      let running: IterableIterator<unknown> | null = null;
      const read = together(() => {
        running = select.iterate();
        running.next();
        return 'the reads\' result';
      });
      expect(read).toBe('the reads\' result');
      (running as IterableIterator<unknown> | null)?.return?.();
      if (db.inTransaction) db.exec('ROLLBACK');
      // Nor when it cannot begin (a statement running already): the reads run on their own.
      const before = select.iterate();
      before.next();
      expect(together(() => db.inTransaction)).toBe(false);
      before.return?.();
      // Inside a transaction the reads join it, and it stays open for its owner.
      db.exec('BEGIN');
      expect(together(() => db.inTransaction)).toBe(true);
      expect(db.inTransaction).toBe(true);
      db.exec('COMMIT');
      expect(together(() => db.inTransaction)).toBe(true);
      expect(db.inTransaction).toBe(false);
    } finally {
      db.close();
    }
  });
});

/** A WAL sync the test settles by hand: how many were asked for, and the hands to settle the oldest. */
function heldSync() {
  const waiting: Array<{ ok: () => void; fail: (e: Error) => void }> = [];
  return {
    walSync: (): WalSync => ({ sync: () => new Promise<void>((ok, fail) => waiting.push({ ok, fail })), close: () => {} }),
    asked: () => waiting.length,
    release: () => waiting.shift()!.ok(),
    fail: (e: Error) => waiting.shift()!.fail(e),
  };
}

/** A claim of `guid` written and its sync let through. */
async function claimSynced(store: SqliteEventStore, held: ReturnType<typeof heldSync>, guid: string) {
  const claim = store.execute(guid, submit());
  await waitFor(() => held.asked() === 1);
  held.release();
  const claimed = await orThrow(claim);
  if (claimed.kind !== 'applied') throw new Error('claim refused');
  return claimed;
}

/** The account system's answer to a claim's first call, recorded (answered at its commit). */
const recordAnswer = (store: SqliteEventStore, guid: string, state: LedgerState) =>
  store.execute(guid, { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{}', latencyMs: 1 }, undefined, { state });

describe('SQLite event store, inline writer at FULL: the WAL synced off the event loop', () => {
  const tmp = useTempDir();
  // Whether `p` settles within 50 ms: what is held back by the sync would have been answered by then (time is the point).
  const settledYet = async (p: Promise<unknown>) => Promise.race([p.then(() => true), sleep(50).then(() => false)]);

  it('a committed batch is answered only once its WAL is on disk; units queued meanwhile wait and share the next sync', async () => {
    const held = heldSync();
    const store = openLedger(join(tmp(), 'l.db'), { walSync: held.walSync });
    const a = store.execute('a', submit());
    await waitFor(() => held.asked() === 1);
    // Committed (this connection reads it), not yet answered: nothing may act on it before the sync.
    expect((await orThrow(store.getLedger('a')))?.status).toBe('SENT');
    expect(await settledYet(a)).toBe(false);
    const b = store.execute('b', submit());
    const c = store.execute('c', submit());
    expect(await settledYet(b)).toBe(false);
    expect(held.asked()).toBe(1); // b and c are not written while a's sync is out
    expect(await orThrow(store.getLedger('b'))).toBeNull();
    held.release();
    expect((await orThrow(a)).kind).toBe('applied');
    await waitFor(() => held.asked() === 1);
    expect(await settledYet(b)).toBe(false);
    held.release();
    expect([(await orThrow(b)).kind, (await orThrow(c)).kind]).toEqual(['applied', 'applied']);
    const closing = store.close();
    await closing;
  });

  it("an outcome of a call is answered at its commit, before the sync; a claim beside it waits for the sync; a batch of outcomes only asks for none (the next sync covers it)", async () => {
    const held = heldSync();
    const store = openLedger(join(tmp(), 'l.db'), { walSync: held.walSync });
    const claimed = await claimSynced(store, held, 'a');
    // Alone in its batch: committed and answered, and no sync asked for.
    const answered = await orThrow(recordAnswer(store, 'a', claimed.state));
    expect(answered).toMatchObject({ kind: 'applied', state: { status: 'DONE' } });
    expect(held.asked()).toBe(0);
    // Beside a claim in one batch: the outcome is answered while the claim waits for the sync its batch asked for.
    const c = store.execute('c', submit());
    await waitFor(() => held.asked() === 1);
    held.release();
    const cClaim = await orThrow(c);
    if (cClaim.kind !== 'applied') throw new Error('claim refused');
    const outcome = store.execute('c', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }, undefined, { state: cClaim.state });
    const d = store.execute('d', submit());
    await waitFor(() => held.asked() === 1);
    expect((await orThrow(outcome))).toMatchObject({ kind: 'applied', state: { status: 'UNKNOWN' } });
    expect(await settledYet(d)).toBe(false);
    held.release();
    expect((await orThrow(d)).kind).toBe('applied');
    await store.close();
  });

  it("the ledger's standing (the continuity mark's position) counts only what is on disk: an outcome answered before its sync is not in it until the next sync", async () => {
    const held = heldSync();
    const store = openLedger(join(tmp(), 'l.db'), { walSync: held.walSync });
    const logPosition = () => logPositionOf(store.db);
    const position = async () => (await orThrow(store.ledgerStanding())).position;
    const opened = logPosition();
    const a = store.execute('a', submit());
    await waitFor(() => held.asked() === 1);
    // Committed, its sync still out: not on disk yet (found in review).
    expect(logPosition()).toBeGreaterThan(opened);
    expect(await position()).toBe(opened);
    held.release();
    const claimed = await orThrow(a);
    if (claimed.kind !== 'applied') throw new Error('claim refused');
    const synced = logPosition();
    expect(await position()).toBe(synced);
    // Answered at its commit, not synced: a power cut now could take it away, so the standing stays where the disk is.
    await orThrow(recordAnswer(store, 'a', claimed.state));
    expect(logPosition()).toBeGreaterThan(synced);
    expect(await position()).toBe(synced);
    // The next claim's sync covers it: once that is on disk, the standing is the log's again.
    const b = store.execute('b', submit());
    await waitFor(() => held.asked() === 1);
    expect(await position()).toBe(synced);
    held.release();
    await orThrow(b);
    expect(await position()).toBe(logPosition());
    // A failed sync: what it was to cover stays out (found in review).
    const goodUpTo = logPosition();
    const c = store.execute('c', submit());
    await waitFor(() => held.asked() === 1);
    held.fail(new Error('EIO: i/o error'));
    await expectLeft(c, 'LEDGER_UNAVAILABLE', /ledger sync failed/);
    expect(logPosition()).toBeGreaterThan(goodUpTo);
    expect(await position()).toBe(goodUpTo);
    await store.close();
  });

  it('closing syncs an outcome answered at its commit and left unsynced: the next process counts what is in the file as on disk', async () => {
    const held = heldSync();
    const store = openLedger(join(tmp(), 'l.db'), { walSync: held.walSync });
    const claimed = await claimSynced(store, held, 'a');
    await orThrow(recordAnswer(store, 'a', claimed.state));
    expect(held.asked()).toBe(0);
    const closing = store.close();
    await waitFor(() => held.asked() === 1);
    held.release();
    await closing;
  });

  it('a failed sync fails its batch and every write after it (the ledger may have lost them), and ping says why', async () => {
    const held = heldSync();
    const store = openLedger(join(tmp(), 'l.db'), { walSync: held.walSync });
    const a = expectLeft(store.execute('a', submit()), 'LEDGER_UNAVAILABLE', /ledger sync failed: EIO/);
    await waitFor(() => held.asked() === 1);
    const b = expectLeft(store.execute('b', submit()), 'LEDGER_UNAVAILABLE', /ledger sync failed: EIO/);
    held.fail(new Error('EIO: i/o error, fdatasync'));
    await Promise.all([a, b]);
    await expectLeft(store.execute('c', submit()), 'LEDGER_UNAVAILABLE', /ledger sync failed/);
    // The batch that could not be synced was copied into the file by a checkpoint (the WAL is empty now).
    await expectLeft(store.ping(), 'LEDGER_UNAVAILABLE', /ledger sync failed: EIO.*the WAL was checkpointed into the ledger file.*restart serve/);
    expect((store.db.pragma('wal_checkpoint(PASSIVE)') as Array<{ log: number }>)[0]?.log).toBe(0);
    expect(held.asked()).toBe(0);
    await store.close();
  });

  it('a unit whose caller gave up while it was queued (its deadline passed during a sync that hung) is not written', async () => {
    const held = heldSync();
    // The deadline is the busy timeout plus 1 s.
    const store = openLedger(join(tmp(), 'l.db'), { walSync: held.walSync, busyTimeoutMs: 50 });
    const a = expectLeft(store.execute('a', submit()), 'LEDGER_UNAVAILABLE', /did not complete within 1050 ms/);
    await waitFor(() => held.asked() === 1);
    await expectLeft(store.execute('b', submit()), 'LEDGER_UNAVAILABLE', /did not complete within 1050 ms/);
    await a;
    held.release();
    // A write after them goes through (with its own sync): anything still queued before it has been written or dropped.
    const c = store.execute('c', submit());
    await waitFor(() => held.asked() === 1, { what: "c's sync" });
    held.release();
    expect((await orThrow(c)).kind).toBe('applied');
    // a was committed before its caller gave up (an orphan claim, which the sweep settles); b never was.
    expect(held.asked()).toBe(0);
    expect((await orThrow(store.getLedger('a')))?.status).toBe('SENT');
    expect(await orThrow(store.getLedger('b'))).toBeNull();
    await store.close();
  });

  it('under a lock held past the busy timeout every queued unit fails in its turn and none is written later (found in review)', async () => {
    const store = openLedger(join(tmp(), 'l.db'), { busyTimeoutMs: 100, maxBatch: 1 });
    const other = new Database(store.path);
    other.exec('BEGIN IMMEDIATE');
    const early = Array.from({ length: 5 }, (_, i) => expectLeft(store.execute(`e${i}`, submit()), 'LEDGER_UNAVAILABLE', /database is locked/));
    await sleep(300); // the point: more units join while the first ones are still failing in turn
    const late = Array.from({ length: 5 }, (_, i) => expectLeft(store.execute(`l${i}`, submit()), 'LEDGER_UNAVAILABLE', /database is locked/));
    await Promise.all([...early, ...late]);
    other.exec('ROLLBACK');
    other.close();
    // The first write once the lock is free goes through alone: none of the failed units is written before or with it.
    expect((await orThrow(store.execute('after', submit()))).kind).toBe('applied');
    expect((await orThrow(store.queryLedger({}))).map((r) => r.guid)).toEqual(['after']);
    await store.close();
  });

  it('a ledger file replaced while its batch was being synced: the batch is answered as unavailable, not applied', async () => {
    const held = heldSync();
    const path = join(tmp(), 'l.db');
    const store = openLedger(path, { walSync: held.walSync, watchFile: { intervalMs: 60_000 } });
    const a = expectLeft(store.execute('a', submit()), 'LEDGER_UNAVAILABLE', /deleted or replaced/);
    await waitFor(() => held.asked() === 1);
    renameSync(path, `${path}.moved`);
    writeFileSync(path, '');
    held.release();
    await a;
    await store.close();
  });

  it('a ledger opened through a symbolic link syncs the WAL of the file SQLite opened, not a file named after the link (found in review)', async () => {
    const dir = tmp();
    await openLedger(join(dir, 'real.db')).close();
    symlinkSync(join(dir, 'real.db'), join(dir, 'link.db'));
    // A stray file where a WAL named after the link would be: syncing it would put nothing of the ledger on disk.
    writeFileSync(join(dir, 'link.db-wal'), '');
    const synced: string[] = [];
    const store = openLedger(join(dir, 'link.db'), { walSync: (file) => (synced.push(file), walSync(file)) });
    expect((await orThrow(store.execute('a', submit()))).kind).toBe('applied');
    expect(synced).toEqual([realpathSync(join(dir, 'real.db'))]);
    await store.close();
  });

  it('a WAL deleted under the running ledger is noticed at the next sync: the write fails and nothing more is written', async () => {
    const store = openLedger(join(tmp(), 'l.db'));
    expect((await orThrow(store.execute('a', submit()))).kind).toBe('applied');
    unlinkSync(`${store.path}-wal`);
    await expectLeft(store.execute('b', submit()), 'LEDGER_UNAVAILABLE', /-wal was deleted while the ledger had it open/);
    await expectLeft(store.execute('c', submit()), 'LEDGER_UNAVAILABLE', /ledger sync failed/);
    await store.close();
  });

  it('a write lock another connection holds is waited for by a timer: the event loop keeps turning, and the write goes through once it is free', async () => {
    const store = openLedger(join(tmp(), 'l.db'), { busyTimeoutMs: 5000 });
    const other = new Database(store.path);
    other.exec('BEGIN IMMEDIATE');
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 5);
    let settled = false;
    const a = store.execute('a', submit()).finally(() => (settled = true));
    // SQLite's busy handler would hold this thread (and the ticker) until the busy timeout ended the write.
    await waitFor(() => ticks > 10, { what: 'the ticker turning while the lock is held' });
    expect(settled).toBe(false);
    other.exec('ROLLBACK');
    other.close();
    expect((await orThrow(a)).kind).toBe('applied');
    clearInterval(ticker);
    await store.close();
  });

  it('walSync puts a real WAL on disk and refuses after close', async () => {
    const store = openLedger(join(tmp(), 'l.db'));
    await orThrow(store.execute('a', submit()));
    const wal = walSync(store.path);
    await expect(wal.sync()).resolves.toBeUndefined();
    wal.close();
    await expect(wal.sync()).rejects.toThrow(/closed/);
    await store.close();
  });
});
