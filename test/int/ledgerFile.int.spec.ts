import { chmodSync, existsSync, linkSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/events/decide.js';
import { looseModeWarning } from '../../src/store/sqlite/ledgerFile.js';
import type { SqliteEventStore } from '../../src/store/sqlite/sqliteStore.js';
import { openLedger, type LedgerOptions } from '../support/ledgerStore.js';
import { checkLedger } from '../../src/store/sqlite/checkLedger.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { sleep, waitFor } from '../support/waitFor.js';
import { orThrow } from '../../src/events/storeResult.js';
import { expectLeft } from '../support/storeResult.js';

const submit = (guid: string, pad = ''): Command => ({ type: 'Submit', request: `{"guid":"${guid}"${pad}}`, fingerprint: guid, timeoutMs: 100, maxAttempts: 3 });
const mode = (path: string) => statSync(path).mode & 0o777;

describe('the ledger file', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const open = ({ path, ...options }: LedgerOptions & { path: string }): SqliteEventStore => cleanup.use(openLedger(path, options));

  // 000 would let a file be created 0644 or 0666; 277 would take the owner's own write bit away.
  it.each([['000', 0o000], ['277', 0o277]] as const)('a new ledger, its -wal and -shm are 0600 and the folders created for it 0700, whatever the umask (%s)', async (_name, umask) => {
    const previous = process.umask(umask);
    try {
      const dir = join(tmp(), 'var', 'lib');
      const path = join(dir, 'ledger.db');
      const store = open({ path });
      await orThrow(store.execute('g', submit('g')));
      expect([mode(path), mode(`${path}-wal`), mode(`${path}-shm`)]).toEqual([0o600, 0o600, 0o600]);
      expect([mode(dir), mode(join(dir, '..'))]).toEqual([0o700, 0o700]);
    } finally {
      process.umask(previous);
    }
  });

  it('an existing ledger keeps the mode it has; one readable by group or others is warned about', async () => {
    const path = join(tmp(), 'l.db');
    await open({ path }).close();
    expect(looseModeWarning(path)).toBeNull();
    chmodSync(path, 0o640);
    await open({ path }).close();
    expect(mode(path)).toBe(0o640);
    expect(looseModeWarning(path)).toMatch(/ledger file .*l\.db is readable by group or others \(mode 0640\)/);
  });

  describe('what is not a guidgate ledger is refused, with the reason, and left byte for byte as it was', () => {
    const refuses = (make: (path: string) => void, reason: RegExp) => () => {
      const path = join(tmp(), 'x.db');
      make(path);
      const before = readFileSync(path);
      expect(() => openLedger(path)).toThrow(reason);
      expect(readFileSync(path).equals(before)).toBe(true);
      expect(existsSync(`${path}-wal`)).toBe(false);
      expect(checkLedger(path)).toMatchObject({ ok: false, problems: [expect.stringMatching(reason)] });
    };
    it('a text file', refuses((p) => writeFileSync(p, 'guid,amount\nA,100\n'.repeat(20)), /not a guidgate ledger: not an SQLite database/));
    it('a file shorter than the SQLite header', refuses((p) => writeFileSync(p, 'SQLite format 3\0'), /not an SQLite database/));
    it('an SQLite file of another program', refuses((p) => {
      const db = new Database(p);
      db.exec("CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER); INSERT INTO accounts VALUES ('A', 1)");
      db.close();
    }, /schema version 0 with tables of something else \(accounts\)/));
    it('an SQLite file with tables named like ours but other columns', refuses((p) => {
      const db = new Database(p);
      db.exec('CREATE TABLE events (id INTEGER); CREATE TABLE ledger (id INTEGER); PRAGMA user_version = 1');
      db.close();
    }, /table events has columns \(id\), expected \(position, guid, seq, type, at, data\)/));
    it('a ledger of a newer guidgate', refuses((p) => {
      const db = new Database(p);
      db.pragma('user_version = 99');
      db.close();
    }, /schema version 99 is newer than this guidgate's/));
  });

  it('an empty file is a new ledger', async () => {
    const path = join(tmp(), 'empty.db');
    writeFileSync(path, '');
    const store = open({ path });
    expect((await orThrow(store.execute('g', submit('g')))).kind).toBe('applied');
  });

  describe.each(['inline', 'thread'] as const)('watched (as serve opens it), writer %s', (writer) => {
    const lostCases = [
      ['deleted', (path: string) => unlinkSync(path)],
      ['moved away', (path: string) => renameSync(path, `${path}.moved`)],
      ['replaced by another ledger', async (path: string) => {
        const other = `${path}.other`;
        await openLedger(other).close();
        renameSync(other, path);
      }],
    ] as const;
    it.each(lostCases)('%s: writes and ping refuse with the reason from the next check on, and onLost is told once', async (_name, lose) => {
      const path = join(tmp(), 'l.db');
      const reasons: string[] = [];
      const store = open({ path, writer, watchFile: { intervalMs: 50, onLost: (r) => reasons.push(r) } });
      expect((await orThrow(store.execute('before', submit('before')))).kind).toBe('applied');
      await orThrow(store.ping());
      linkSync(path, `${path}.keep`);
      await lose(path);
      const reason = /ledger file .*l\.db was deleted or replaced/;
      await expectLeft(store.execute('after', submit('after')), 'LEDGER_UNAVAILABLE', reason);
      await expectLeft(store.execute('after', submit('after')), 'LEDGER_UNAVAILABLE', reason);
      await expectLeft(store.ping(), 'LEDGER_UNAVAILABLE', reason);
      await sleep(200); // nothing may happen: the timer (every 50 ms) has had its chances to tell again
      expect(reasons).toHaveLength(1);
      expect(reasons[0]).toMatch(reason);
      // Nothing of the refused write reached the file that was open. (SQLite does not checkpoint a moved
      // file on close: its last commits stay in the -wal beside the path until the file is put back.)
      await store.close();
      renameSync(`${path}.keep`, path);
      const check = open({ path });
      expect(await orThrow(check.getLedger('after'))).toBeNull();
      expect(await orThrow(check.getLedger('before'))).not.toBeNull();
    });

    it('the timer notices without any traffic', async () => {
      const path = join(tmp(), 'l.db');
      const reasons: string[] = [];
      open({ path, writer, watchFile: { intervalMs: 50, onLost: (r) => reasons.push(r) } });
      unlinkSync(path);
      await waitFor(() => reasons.length > 0, { what: 'the timer noticing' });
      expect(reasons).toEqual([expect.stringMatching(/no file at its path any more/)]);
    });
  });

  it('unwatched (the operator commands), a deleted file is not checked', async () => {
    const path = join(tmp(), 'l.db');
    const store = open({ path });
    unlinkSync(path);
    expect((await orThrow(store.execute('g', submit('g')))).kind).toBe('applied');
  });
});

describe('the write deadline: a claim that does not commit within the busy timeout plus the margin', () => {
  const tmp = useTempDir();

  it('fails with LEDGER_UNAVAILABLE at the deadline; the writer thread, reaching the claim after that, leaves it unwritten', async () => {
    const path = join(tmp(), 'l.db');
    // A log big enough that rebuilding it a few times keeps the writer thread busy well past the deadline.
    const seed = openLedger(path, { synchronous: 'NORMAL' });
    const pad = 'x'.repeat(400);
    for (let b = 0; b < 20; b++) {
      await Promise.all(Array.from({ length: 1000 }, (_, i) => orThrow(seed.execute(`seed-${b}-${i}`, submit(`seed-${b}-${i}`, `,"pad":"${pad}"`)))));
    }
    // As many rebuilds as take three deadlines on this machine, timed here (four at least).
    const started = performance.now();
    await orThrow(seed.rebuildProjection());
    const rebuilds = Math.max(4, Math.ceil((3 * 1050) / (performance.now() - started)));
    await seed.close();

    const busyTimeoutMs = 50; // deadline 1050 ms
    const store = openLedger(path, { writer: 'thread', busyTimeoutMs });
    try {
      // The rebuilds queued ahead of the claim in the same turn: one batch on the writer, long past the deadline.
      const rebuild = Promise.all(Array.from({ length: rebuilds }, () => orThrow(store.rebuildProjection()))).then((r) => r[0]);
      await expectLeft(store.execute('late', submit('late')), 'LEDGER_UNAVAILABLE', /ledger write did not complete within 1050 ms/);
      // The rebuild (no deadline) and the claim shared the batch; by the time the writer came to the claim its
      // caller had answered without it (E503, no call): the claim is not written, not even as an orphan.
      expect(await rebuild).toEqual({ rows: 20_000 });
      expect(await orThrow(store.getLedger('late'))).toBeNull();
      expect(await orThrow(store.readStream('late'))).toEqual([]);
      // The next claim of the GUID goes through.
      expect((await orThrow(store.execute('late', submit('late')))).kind).toBe('applied');
    } finally {
      await store.close();
    }
  }, 120_000);
});
