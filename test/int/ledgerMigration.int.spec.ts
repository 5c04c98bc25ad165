import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, it, expect } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { migrate, SCHEMA_VERSION } from '../../src/store/sqlite/schema.js';
import { createWriteEngine, type WriteOp } from '../../src/store/sqlite/writeEngine.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';
import { orThrow } from '../../src/events/storeResult.js';
import { useTempDir } from '../support/tmp.js';

const submit = (guid: string, now: number): WriteOp => ({
  op: 'execute', guid, now, actor: null,
  command: { type: 'Submit', request: `{"guid":"${guid}"}`, fingerprint: `f-${guid}`, timeoutMs: 1000, maxAttempts: 3 },
});

describe('SQLite migration 7: the ledger as a rowid table', () => {
  const tmp = useTempDir();

  it('a ledger of schema 6 (rows keyed by GUID, WITHOUT ROWID) keeps every row, column and index, its rows now in order of creation', async () => {
    const path = join(tmp(), 'v6.db');
    const raw = new Database(path);
    raw.pragma('journal_mode = WAL');
    migrate(raw, 6);
    expect(raw.prepare("SELECT sql FROM sqlite_master WHERE name = 'ledger'").pluck().get()).toMatch(/WITHOUT ROWID/);
    // Today's engine writes the rows: given the actors table it inserts into, taken away again below.
    raw.exec('CREATE TABLE actors (id INTEGER PRIMARY KEY, actor TEXT NOT NULL); ALTER TABLE events ADD COLUMN actor_id INTEGER');
    const engine = createWriteEngine(raw, ledgerProjection, 1000);
    // Created in an order unlike the GUIDs' (z before a), in several states.
    const guids = ['z-1', 'm-2', 'a-3', 'q-4'];
    expect(engine.run(guids.map((g, i) => submit(g, 1000 + i))).every((o) => o.ok)).toBe(true);
    engine.run([
      { op: 'execute', guid: 'm-2', now: 2000, actor: null, command: { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{"code":"0000"}', latencyMs: 1 } },
      { op: 'execute', guid: 'a-3', now: 2000, actor: null, command: { type: 'RecordTimeout', attempt: 1, reason: 'timeout' } },
    ]);
    raw.exec('ALTER TABLE events DROP COLUMN actor_id; DROP TABLE actors');
    const before = raw.prepare('SELECT * FROM ledger ORDER BY guid').all();
    const columns = raw.prepare("SELECT name FROM pragma_table_info('ledger')").pluck().all();
    raw.close();

    const store = openLedger(path);
    try {
      const db = store.db;
      expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
      expect(db.prepare("SELECT sql FROM sqlite_master WHERE name = 'ledger'").pluck().get()).not.toMatch(/WITHOUT ROWID/);
      expect(db.prepare("SELECT name FROM pragma_table_info('ledger')").pluck().all()).toEqual(columns);
      expect(db.prepare('SELECT * FROM ledger ORDER BY guid').all()).toEqual(before);
      expect(db.prepare('SELECT guid FROM ledger ORDER BY rowid').pluck().all()).toEqual(guids);
      expect(db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ledger' AND sql IS NOT NULL ORDER BY name").pluck().all())
        .toEqual(['ledger_status_updated', 'ledger_unsettled']);
      expect(await orThrow(store.verifyProjection())).toEqual([]);
      // The GUID is still the key: a second claim of one is refused, a new one lands after the copied rows.
      expect((await orThrow(store.execute('z-1', { type: 'Submit', request: '{}', fingerprint: 'f-z-1', timeoutMs: 1000, maxAttempts: 3 }))).kind).toBe('refused');
      expect((await orThrow(store.execute('b-5', { type: 'Submit', request: '{}', fingerprint: 'f', timeoutMs: 1000, maxAttempts: 3 }))).kind).toBe('applied');
      expect(db.prepare('SELECT guid FROM ledger ORDER BY rowid DESC LIMIT 1').pluck().get()).toBe('b-5');
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      // A rowid table lets a TEXT PRIMARY KEY be NULL unless it says NOT NULL, as WITHOUT ROWID did by itself (found in review).
      expect(() => db.prepare("INSERT INTO ledger (guid, status, fingerprint, attempts, created_at, updated_at, last_seq) VALUES (NULL, 'SENT', 'f', 1, 1, 1, 1)").run())
        .toThrow(/NOT NULL constraint failed: ledger.guid/);
    } finally {
      await store.close();
    }
  });
});
