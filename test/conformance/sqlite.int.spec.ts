import { join } from 'node:path';
import Database from 'better-sqlite3';
import { openStore } from '../../src/store/openStore.js';
import { describeStoreContract, type StoreBackdoor, type StoreFactory, type StoreFixture } from './storeContract.js';
import { useTempDir } from '../support/tmp.js';

/** The backdoor of a SQLite ledger: its own connection to the file, one statement at a time. */
function sqliteBackdoor(path: string): StoreBackdoor {
  const run = (sql: string, ...params: unknown[]): Promise<void> => {
    const db = new Database(path);
    try {
      db.prepare(sql).run(...params);
    } finally {
      db.close();
    }
    return Promise.resolve();
  };
  return {
    setProjectionSeq: (guid, lastSeq) => run('UPDATE ledger SET last_seq = ? WHERE guid = ?', lastSeq, guid),
    setProjectionStatus: (guid, status, code) => run('UPDATE ledger SET status = ?, code = ? WHERE guid = ?', status, code, guid),
    deleteProjectionRow: (guid) => run('DELETE FROM ledger WHERE guid = ?', guid),
    insertEvent: (guid, seq, type, data, actor) => run('INSERT INTO events (guid, seq, type, at, data, actor) VALUES (?, ?, ?, 1, ?, ?)', guid, seq, type, data, actor ?? null),
    actorsStored() {
      const db = new Database(path, { readonly: true });
      try {
        return Promise.resolve(db.prepare('SELECT (SELECT count(*) FROM actors) AS actors, (SELECT count(*) FROM events WHERE actor IS NOT NULL) AS eventsWithText').get() as { actors: number; eventsWithText: number });
      } finally {
        db.close();
      }
    },
    rawEventData(guid) {
      const db = new Database(path, { readonly: true });
      try {
        const row = db.prepare('SELECT group_concat(data) AS d FROM events WHERE guid = ?').get(guid) as { d: string | null };
        return Promise.resolve(row.d ?? '');
      } finally {
        db.close();
      }
    },
    failProjectionWritesOf: (guid) =>
      run(`CREATE TRIGGER fail_${guid.replace(/\W/g, '_')} BEFORE INSERT ON ledger WHEN NEW.guid = '${guid.replace(/'/g, "''")}' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`),
    // The file's write lock, whatever the GUID: SQLite locks no less.
    lock() {
      const holder = new Database(path);
      holder.exec('BEGIN IMMEDIATE');
      return Promise.resolve(() => {
        holder.exec('ROLLBACK');
        holder.close();
        return Promise.resolve();
      });
    },
    markSchemaNewer: () => run('PRAGMA user_version = 999'),
  };
}

for (const writer of ['inline', 'thread'] as const) {
  const tmp = useTempDir();
  const factory: StoreFactory = {
    create(): Promise<StoreFixture> {
      const path = join(tmp(), 'ledger.db');
      return Promise.resolve({ db: path, open: (o) => openStore(path, { writer, ...o }), backdoor: sqliteBackdoor(path) });
    },
    // useTempDir removes the folder after each test.
    dispose: () => Promise.resolve(),
  };
  describeStoreContract(`SQLite, writer ${writer}`, factory);
}
