import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, it, expect } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { useTempDir } from '../support/tmp.js';
import { orThrow } from '../../src/events/storeResult.js';

describe('the ledger channel column', () => {
  const tmp = useTempDir();

  it('a ledger written before channels existed gains the column; its rows read as claimed without a key', async () => {
    const path = join(tmp(), 'old.db');
    // Schema version 1 exactly as it shipped, with one row.
    const raw = new Database(path);
    raw.exec(`
      CREATE TABLE events (position INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, seq INTEGER NOT NULL CHECK (seq >= 0),
        type TEXT NOT NULL, at INTEGER NOT NULL, data TEXT NOT NULL, UNIQUE (guid, seq));
      CREATE TABLE ledger (guid TEXT PRIMARY KEY, status TEXT NOT NULL, code TEXT, request TEXT, response TEXT, fingerprint TEXT NOT NULL,
        attempts INTEGER NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, last_seq INTEGER NOT NULL, sent_at INTEGER,
        timeout_ms INTEGER) WITHOUT ROWID;
      INSERT INTO events (guid, seq, type, at, data) VALUES ('OLD', 0, 'Claimed', 1, '{"request":"{}","fingerprint":"f"}');
      INSERT INTO ledger VALUES ('OLD', 'RECEIVED', NULL, '{}', NULL, 'f', 0, 1, 1, 0, NULL, NULL);
    `);
    raw.pragma('user_version = 1');
    raw.close();

    const store = openLedger(path, { writer: 'inline' });
    try {
      expect((await orThrow(store.getLedger('OLD')))?.channel).toBeNull();
      expect(await orThrow(store.verifyProjection())).toEqual([]);
      const r = await orThrow(store.execute('NEW', { type: 'Submit', request: '{}', fingerprint: 'f', channel: 'bank-a', timeoutMs: 1000, maxAttempts: 3 }));
      expect(r.kind).toBe('applied');
      expect((await orThrow(store.getLedger('NEW')))?.channel).toBe('bank-a');
      expect((await orThrow(store.readStream('NEW')))[0]?.data).toEqual({ request: '{}', fingerprint: 'f', channel: 'bank-a' });
      // The projection and a replay of the log agree on the channel.
      expect(await orThrow(store.verifyProjection())).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
