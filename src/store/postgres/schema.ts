import type pg from 'pg';
import { LedgerMissingError } from '../../events/errors.js';
import { UNSETTLED_SQL } from '../shared/unsettledIndex.js';

/**
 * Schema migrations, applied in order inside one transaction that holds an advisory lock, so that several
 * processes opening a fresh database at once migrate it once. `schema_version` records how many ran.
 * Ordinary logged tables: a claim acknowledged after COMMIT must survive a crash of PostgreSQL itself.
 * Never edit a shipped migration: add a new one.
 */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE events (
    position bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    guid     text COLLATE "C" NOT NULL,
    seq      integer NOT NULL CHECK (seq >= 0),
    type     text    NOT NULL,
    at       bigint  NOT NULL,
    data     text    NOT NULL,
    PRIMARY KEY (guid, seq)
  );
  CREATE TABLE ledger (
    guid        text COLLATE "C" PRIMARY KEY,
    status      text    NOT NULL,
    code        text,
    request     text,
    response    text,
    fingerprint text    NOT NULL,
    channel     text,
    attempts    integer NOT NULL,
    created_at  bigint  NOT NULL,
    updated_at  bigint  NOT NULL,
    last_seq    integer NOT NULL,
    sent_at     bigint,
    timeout_ms  bigint,
    failed_by_inquiry integer NOT NULL DEFAULT 0
  );
  -- Beside the log (CONTRACT.md §7): when to ask again about an attempt inquiries could not settle.
  CREATE TABLE inquiry_schedule (
    guid      text COLLATE "C" PRIMARY KEY,
    sent_at   bigint  NOT NULL,
    inquiries integer NOT NULL,
    next_at   bigint  NOT NULL
  );
  CREATE INDEX ledger_status_updated ON ledger (status, updated_at);
  CREATE INDEX ledger_status_sent ON ledger (status, sent_at);
  CREATE INDEX ledger_status_guid ON ledger (status, guid);
  `,
  // The audit trail (as SQLite's migration 4): who wrote each event, and the channel's requests
  // beside the log (metadata only; tombstone removal deletes them with the events).
  `
  ALTER TABLE events ADD COLUMN actor text;
  CREATE TABLE requests (
    position          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    guid              text COLLATE "C" NOT NULL,
    at                bigint  NOT NULL,
    key               text,
    code              text    NOT NULL,
    fingerprint_match boolean NOT NULL
  );
  CREATE INDEX requests_guid ON requests (guid, position);
  `,
  // 3: leases beside the log (CONTRACT.md §4, maintenance across instances): the row a resolve or reprocess run
  // is inquiring about or sending, so that another process does not do it too. No event: a lease changes no state.
  `
  CREATE TABLE leases (
    guid   text COLLATE "C" PRIMARY KEY,
    holder text   NOT NULL,
    until  bigint NOT NULL
  );
  `,
  // 4: index only what is searched, as SQLite's migration 6: one partial index over the unsettled states (few rows at
  // any time; src/store/shared/unsettledIndex.ts) replaces (status, sent_at) and (status, guid) over every row. A transfer's
  // outcome changes its row's status, so PostgreSQL cannot update it in place (no HOT update) and writes a new entry
  // into every index of the table: four before, two now (the key and (status, updated_at), which purge and the
  // count by status read). Building it reads the table once, under the migration's lock.
  `
  DROP INDEX IF EXISTS ledger_status_sent;
  DROP INDEX IF EXISTS ledger_status_guid;
  CREATE INDEX ledger_unsettled ON ledger (status, guid) WHERE ${UNSETTLED_SQL};
  `,
  // 5: reconciliation runs (CONTRACT.md §8) beside the log, as SQLite's migration 8.
  `
  CREATE TABLE reconciliations (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recorded_at bigint NOT NULL,
    window_from bigint NOT NULL,
    window_to   bigint NOT NULL,
    source      text   NOT NULL,
    sha256      text   NOT NULL,
    breaks      bigint NOT NULL,
    p1          bigint NOT NULL,
    p2          bigint NOT NULL,
    summary     text   NOT NULL
  );
  CREATE TABLE reconciliation_breaks (
    run_id     bigint NOT NULL REFERENCES reconciliations (id),
    guid       text COLLATE "C" NOT NULL,
    category   text   NOT NULL,
    severity   text   NOT NULL,
    first_seen bigint NOT NULL,
    ledger     text,
    journal    text   NOT NULL,
    PRIMARY KEY (run_id, guid)
  );
  CREATE INDEX reconciliation_breaks_guid ON reconciliation_breaks (guid, run_id);
  `,
  // Each key's last use (serve --keys), written at most once a minute by each serve, shown by `keys list --db`.
  `
  CREATE TABLE key_uses (
    key          text COLLATE "C" PRIMARY KEY,
    last_used_at bigint NOT NULL
  );
  `,
  // The continuity guard's record in the ledger itself (continuity.ts): the highest position and server every
  // relay's check has seen (one row, only ever raised), and every window a relay opened, so that a relay restarted
  // or started later keeps the window and learns of a server change it did not watch.
  `
  CREATE TABLE continuity_high_water (
    id        boolean PRIMARY KEY DEFAULT true CHECK (id),
    position  bigint NOT NULL,
    server    text,
    last_guid text COLLATE "C",
    last_seq  integer,
    at        bigint NOT NULL
  );
  CREATE TABLE continuity_windows (
    opened_at bigint NOT NULL,
    ends_at   bigint NOT NULL,
    why       text,
    standing  jsonb,
    PRIMARY KEY (opened_at, ends_at)
  );
  CREATE TABLE continuity_relays (
    relay         text PRIMARY KEY,
    server        text    NOT NULL,
    checked_at    bigint  NOT NULL,
    sync_attested boolean NOT NULL,
    stopped       boolean NOT NULL DEFAULT false,
    retired       boolean NOT NULL DEFAULT false,
    vouched       text,
    vouch_ok      boolean
  );
  `,
  // The notification outbox (CONTRACT.md §11), as SQLite's: written in the append's statement (writeBatch.ts),
  // leased with UPDATE … FOR UPDATE SKIP LOCKED by the serve processes that deliver (notifications.ts).
  `
  CREATE TABLE notifications (
    guid         text COLLATE "C" NOT NULL,
    seq          integer NOT NULL,
    type         text    NOT NULL,
    at           bigint  NOT NULL,
    body         text    NOT NULL,
    state        text    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'given_up')),
    created_at   bigint  NOT NULL,
    next_at      bigint  NOT NULL,
    attempts     integer NOT NULL DEFAULT 0,
    holder       text,
    lease_until  bigint,
    last_result  text,
    delivered_at bigint,
    PRIMARY KEY (guid, seq)
  );
  CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
  CREATE TABLE notification_attempts (
    position    bigserial PRIMARY KEY,
    guid        text COLLATE "C" NOT NULL,
    seq         integer NOT NULL,
    at          bigint  NOT NULL,
    result      text    NOT NULL,
    http_status integer,
    detail      text    NOT NULL,
    latency_ms  integer NOT NULL
  );
  CREATE INDEX notification_attempts_guid ON notification_attempts (guid, position);
  `,
  // Each actor kept once (as SQLite's migration 13; src/store/shared/rowEncoding.ts, EncodedActor): events written
  // from now on name their actor by id; events written before keep their text in events.actor.
  `
  CREATE TABLE actors (
    id    bigint PRIMARY KEY,
    actor text   NOT NULL
  );
  ALTER TABLE events ADD COLUMN actor_id bigint;
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** Any fixed 64-bit key; it only has to differ from other advisory locks taken in the same database. */
const MIGRATION_LOCK = 0x6775_6964_6761_7465n; // "guidgate"

/**
 * Brings the schema up to date. With `create: false` (every command but `serve`, CONTRACT.md §5) a database
 * without the schema is left untouched and `LedgerMissingError` thrown: a typo in the URL must not look like an
 * empty ledger. `version`: how far (default: this guidgate's; tests stop earlier to migrate an older schema).
 */
export async function migrate(client: pg.ClientBase, create = true, version = SCHEMA_VERSION): Promise<void> {
  if (!create) {
    const { rows } = await client.query<{ t: string | null }>("SELECT to_regclass('schema_version')::text AS t");
    if (rows[0]?.t == null) throw new LedgerMissingError('no ledger in this database (serve creates it)');
  }
  // READ COMMITTED whatever the database's default: each statement after the lock must see what the
  // process that held the lock before committed (a snapshot taken before the wait would not).
  await client.query('BEGIN ISOLATION LEVEL READ COMMITTED');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK.toString()]);
    await client.query('CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)');
    const { rows } = await client.query<{ version: number | null }>('SELECT max(version) AS version FROM schema_version');
    const current = rows[0]?.version ?? 0;
    if (current > SCHEMA_VERSION) {
      throw new Error(`ledger schema version ${current} is newer than this guidgate (${SCHEMA_VERSION}); upgrade guidgate`);
    }
    for (let v = current; v < version; v++) {
      await client.query(MIGRATIONS[v]!);
      await client.query('INSERT INTO schema_version (version) VALUES ($1)', [v + 1]);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
