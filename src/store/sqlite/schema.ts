import type Database from 'better-sqlite3';
import { UNSETTLED_SQL } from '../shared/unsettledIndex.js';

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
  // Contract v2 §7. failed_by_inquiry is part of the projection (evolve derives it; a FAILED row whose last
  // event is a Resolved was made FAILED by an inquiry). inquiry_schedule is beside the log, not in it: an
  // inquiry that could not tell changes no state, so it is no event; it only spaces out the next one.
  `
  ALTER TABLE ledger ADD COLUMN failed_by_inquiry INTEGER NOT NULL DEFAULT 0;
  UPDATE ledger SET failed_by_inquiry = 1 WHERE status = 'FAILED'
    AND EXISTS (SELECT 1 FROM events e WHERE e.guid = ledger.guid AND e.seq = ledger.last_seq AND e.type = 'Resolved');
  CREATE TABLE inquiry_schedule (
    guid      TEXT PRIMARY KEY,
    sent_at   INTEGER NOT NULL,
    inquiries INTEGER NOT NULL,
    next_at   INTEGER NOT NULL
  ) WITHOUT ROWID;
  `,
  // The audit trail. events.actor: who wrote the event (JSON, src/events/codecs.ts Actor; NULL for
  // events written before). requests: every channel request for a GUID the ledger has, beside the log (a
  // request that changes no state is no event), metadata only; tombstone removal deletes them with the events.
  `
  ALTER TABLE events ADD COLUMN actor TEXT;
  CREATE TABLE requests (
    position          INTEGER PRIMARY KEY AUTOINCREMENT,
    guid              TEXT    NOT NULL,
    at                INTEGER NOT NULL,
    key               TEXT,
    code              TEXT    NOT NULL,
    fingerprint_match INTEGER NOT NULL CHECK (fingerprint_match IN (0, 1))
  );
  CREATE INDEX requests_guid ON requests (guid, position);
  `,
  // 5: leases beside the log (CONTRACT.md §4, maintenance across instances): the row a resolve or reprocess run
  // is inquiring about or sending, so that another process does not do it too. No event: a lease changes no state.
  `
  CREATE TABLE leases (
    guid   TEXT PRIMARY KEY,
    holder TEXT    NOT NULL,
    until  INTEGER NOT NULL
  ) WITHOUT ROWID;
  `,
  // 6: index only what is searched: the sweep, resolve, reprocess and the dead-letter count look for unsettled rows, which are few
  // at any time, so one partial index over them (in GUID order, for paging) replaces (status, sent_at) and
  // (status, guid) over every row. The latter put each new random GUID on a random page of a B-tree as
  // big as the ledger, twice per transfer. (status, updated_at) stays: purge and the count by status read it.
  `
  DROP INDEX IF EXISTS ledger_status_sent;
  DROP INDEX IF EXISTS ledger_status_guid;
  CREATE INDEX ledger_unsettled ON ledger (status, guid) WHERE ${UNSETTLED_SQL};
  `,
  // 7: the ledger as a rowid table, its GUID primary key an index beside it (the same columns, in the same order).
  // WITHOUT ROWID kept each row (request and response included, ~1 KB) in a B-tree ordered by GUID: a random GUID
  // put every claim, and every outcome ms later, on a random page of a tree as big as the ledger, split it often,
  // and wrote that page to the WAL (and again at the checkpoint) for each. Rows in insertion order put both on the
  // newest pages, which one commit shares; only the small GUID index is written at random, once per claim
  // (docs/performance.md). Copied in order of creation, so older rows stay together for purge. NOT NULL: in a rowid
  // table SQLite lets a TEXT PRIMARY KEY be NULL, as WITHOUT ROWID did not.
  `
  CREATE TABLE ledger_rowid (
    guid        TEXT NOT NULL PRIMARY KEY,
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
    timeout_ms  INTEGER,
    channel     TEXT,
    failed_by_inquiry INTEGER NOT NULL DEFAULT 0
  );
  INSERT INTO ledger_rowid SELECT guid, status, code, request, response, fingerprint, attempts, created_at, updated_at, last_seq,
    sent_at, timeout_ms, channel, failed_by_inquiry FROM ledger ORDER BY created_at, guid;
  DROP TABLE ledger;
  ALTER TABLE ledger_rowid RENAME TO ledger;
  CREATE INDEX ledger_status_updated ON ledger (status, updated_at);
  CREATE INDEX ledger_unsettled ON ledger (status, guid) WHERE ${UNSETTLED_SQL};
  `,
  // 8: reconciliation runs (CONTRACT.md §8) beside the log: a run changes no transfer's state. The summary
  // as JSON text (src/store/shared/reconciliationRows.ts), beside the columns runs are listed by; each break with the
  // run that first saw it, found by GUID for a transfer's history.
  `
  CREATE TABLE reconciliations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    recorded_at INTEGER NOT NULL,
    window_from INTEGER NOT NULL,
    window_to   INTEGER NOT NULL,
    source      TEXT    NOT NULL,
    sha256      TEXT    NOT NULL,
    breaks      INTEGER NOT NULL,
    p1          INTEGER NOT NULL,
    p2          INTEGER NOT NULL,
    summary     TEXT    NOT NULL
  );
  CREATE TABLE reconciliation_breaks (
    run_id     INTEGER NOT NULL REFERENCES reconciliations (id),
    guid       TEXT    NOT NULL,
    category   TEXT    NOT NULL,
    severity   TEXT    NOT NULL,
    first_seen INTEGER NOT NULL,
    ledger     TEXT,
    journal    TEXT    NOT NULL,
    PRIMARY KEY (run_id, guid)
  ) WITHOUT ROWID;
  CREATE INDEX reconciliation_breaks_guid ON reconciliation_breaks (guid, run_id);
  `,
  // 9: each key's last use (serve --keys), written at most once a minute by serve, shown by `keys list --db`.
  `
  CREATE TABLE key_uses (
    key          TEXT    PRIMARY KEY,
    last_used_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  `,
  // The notification outbox (CONTRACT.md §11) beside the log: a row per notification an append made due, written
  // in that append's transaction (src/events/notifications.ts says when); its body is fixed then and signed on each
  // attempt. `serve --notify-url` leases the due ones (holder, lease_until) and records each attempt in
  // notification_attempts, which `history` shows. Purge removes a GUID's notifications with its response.
  `
  CREATE TABLE notifications (
    guid         TEXT    NOT NULL,
    seq          INTEGER NOT NULL,
    type         TEXT    NOT NULL,
    at           INTEGER NOT NULL,
    body         TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'given_up')),
    created_at   INTEGER NOT NULL,
    next_at      INTEGER NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    holder       TEXT,
    lease_until  INTEGER,
    last_result  TEXT,
    delivered_at INTEGER,
    PRIMARY KEY (guid, seq)
  ) WITHOUT ROWID;
  CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
  CREATE TABLE notification_attempts (
    position    INTEGER PRIMARY KEY AUTOINCREMENT,
    guid        TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    result      TEXT    NOT NULL,
    http_status INTEGER,
    detail      TEXT    NOT NULL,
    latency_ms  INTEGER NOT NULL
  );
  CREATE INDEX notification_attempts_guid ON notification_attempts (guid, position);
  `,
  // Which continuity mark last vouched for this ledger (its random id and folder): src/store/sqlite/continuityMark.ts.
  `
  CREATE TABLE continuity_vouch (
    one     INTEGER PRIMARY KEY CHECK (one = 1),
    mark_id TEXT    NOT NULL,
    folder  TEXT    NOT NULL,
    at      INTEGER NOT NULL
  );
  `,
  // Each actor kept once (src/store/shared/rowEncoding.ts, EncodedActor): an event written from now on names its
  // actor by id, where it held the actor's JSON text (about 100 bytes, a third of a transfer's events). Events
  // written before keep their text in events.actor; a read takes whichever the event has.
  `
  CREATE TABLE actors (
    id    INTEGER PRIMARY KEY,
    actor TEXT    NOT NULL
  );
  ALTER TABLE events ADD COLUMN actor_id INTEGER;
  `,
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
