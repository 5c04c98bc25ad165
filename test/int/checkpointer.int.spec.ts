import { copyFileSync, existsSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/events/decide.js';
import { orThrow } from '../../src/events/storeResult.js';
import { BACKSTOP_PAGES } from '../../src/store/sqlite/checkpointer.js';
import { openLedger } from '../support/ledgerStore.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

const submit = (guid: string): Command => ({ type: 'Submit', request: `{"guid":"${guid}"}`, fingerprint: 'fp', timeoutMs: 3000, maxAttempts: 3 });

/** The rows of the ledger file alone, as a copy without its WAL reads it: what checkpoints have put there. */
function rowsInFile(db: string, dir: string): number {
  const copy = join(dir, `copy-${Math.random()}.db`);
  copyFileSync(db, copy);
  const c = new Database(copy, { readonly: true });
  try {
    // The schema too is in the WAL until a checkpoint.
    if (c.prepare("SELECT 1 FROM sqlite_schema WHERE name = 'ledger'").get() === undefined) return 0;
    return (c.prepare('SELECT COUNT(*) AS n FROM ledger').get() as { n: number }).n;
  } finally {
    c.close();
  }
}

describe('background checkpoints (serve: src/store/sqlite/checkpointer.ts)', () => {
  const tmp = useTempDir();

  it('the WAL reaches the ledger file without the writing connection checkpointing, which keeps only its backstop', async () => {
    const dir = tmp();
    const db = join(dir, 'ledger.db');
    const store = openLedger(db, { backgroundCheckpoints: {} });
    expect(store.db.pragma('wal_autocheckpoint', { simple: true })).toBe(BACKSTOP_PAGES);
    // A few dozen pages: far below SQLite's own 1,000-page checkpoint and the backstop, so only the thread copies them.
    for (let i = 0; i < 50; i++) await orThrow(store.execute(`g-${i}`, submit(`g-${i}`)));
    await waitFor(() => rowsInFile(db, dir) === 50, { what: 'the 50 rows checkpointed into the ledger file' });
    await orThrow(store.close());
    // The checkpoint thread closed its connection first: the writing connection was the last, and removed the WAL.
    expect(existsSync(`${db}-wal`)).toBe(false);
  });

  it('a thread that fails (here: the file gone before it could open it) is said once, and commits checkpoint every 1,000 pages again', async () => {
    const dir = tmp();
    const db = join(dir, 'ledger.db');
    const stopped: string[] = [];
    const store = openLedger(db, { backgroundCheckpoints: { onStopped: (reason) => stopped.push(reason) } });
    // Synchronously after the open: the thread opens the file by its path a few milliseconds later.
    unlinkSync(db);
    await waitFor(() => stopped.length > 0, { what: 'the stop said' });
    expect(stopped).toEqual([expect.stringMatching(/ledger\.db/)]);
    expect(store.db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
    await orThrow(store.close());
  });

  it('without it (every command but serve) SQLite checkpoints as usual: the same writes stay in the WAL', async () => {
    const dir = tmp();
    const db = join(dir, 'ledger.db');
    const store = openLedger(db);
    expect(store.db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
    for (let i = 0; i < 50; i++) await orThrow(store.execute(`g-${i}`, submit(`g-${i}`)));
    expect(rowsInFile(db, dir)).toBe(0);
    await orThrow(store.close());
  });
});
