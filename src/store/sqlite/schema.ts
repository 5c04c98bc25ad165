import type Database from 'better-sqlite3';

/**
 * Schema migrations, applied in order; `PRAGMA user_version` records how many ran. Never edit a shipped
 * migration: add a new one.
 */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE events (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    guid     TEXT    NOT NULL,
    seq      INTEGER NOT NULL CHECK (seq >= 0),
    type     TEXT    NOT NULL,
    at       INTEGER NOT NULL,
    data     TEXT    NOT NULL,
    UNIQUE (guid, seq)
  );
  CREATE TABLE ledger (
    guid        TEXT PRIMARY KEY,
    status      TEXT    NOT NULL,
    code        TEXT,
    request     TEXT,
    response    TEXT,
    fingerprint TEXT    NOT NULL,
    attempts    INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    last_seq    INTEGER NOT NULL,
    sent_at     INTEGER,
    timeout_ms  INTEGER
  ) WITHOUT ROWID;
  CREATE INDEX ledger_status_updated ON ledger (status, updated_at);
  CREATE INDEX ledger_status_sent ON ledger (status, sent_at);
  CREATE INDEX ledger_status_guid ON ledger (status, guid);
  `,
  // The key that claimed the GUID (CONTRACT.md §6); NULL for rows claimed without keys.
  `ALTER TABLE ledger ADD COLUMN channel TEXT;`,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** Runs the migrations up to `version` (default: this guidgate's). */
export function migrate(db: Database.Database, version = SCHEMA_VERSION): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  if (current > SCHEMA_VERSION) {
    throw new Error(`ledger schema version ${current} is newer than this guidgate (${SCHEMA_VERSION}); upgrade guidgate`);
  }
  if (current >= version) return;
  db.transaction(() => {
    // Read again under the write lock: another process opening the same new file may have migrated it since.
    const locked = db.pragma('user_version', { simple: true }) as number;
    for (let v = locked; v < version; v++) db.exec(MIGRATIONS[v]!);
    db.pragma(`user_version = ${Math.max(locked, version)}`);
  }).immediate();
}
