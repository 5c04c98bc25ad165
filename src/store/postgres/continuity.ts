import type pg from 'pg';
import type { ContinuityMark, EventKey, LedgerStanding, ServerChange } from '../../events/store.js';

/**
 * The PostgreSQL side of the continuity guard (CONTRACT.md §9): which server and timeline answer under the
 * connection, and which events the log lacks. A promoted standby keeps the system identifier of its primary but
 * writes on a new timeline (the first 8 hex digits of the current WAL file's name: exact from the promotion on,
 * where `pg_control_checkpoint()` lags until the next checkpoint); a restart keeps both and changes the
 * postmaster's start time; another cluster has another system identifier.
 */
const STANDING_SQL = `
  SELECT CASE WHEN pg_is_in_recovery() THEN NULL
              ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END AS timeline,
         pg_is_in_recovery() AS recovery,
         floor(extract(epoch FROM pg_postmaster_start_time()) * 1000)::bigint AS started,
         coalesce(host(inet_server_addr()), 'local') AS host,
         coalesce(inet_server_port(), 0) AS port,
         greatest((SELECT coalesce(max(position), 0) FROM events),
                  (SELECT coalesce(max(position), 0) FROM continuity_high_water)) AS position`;

/*
 * The position is the log's highest or the high-water mark the relays recorded, whichever is higher: removing
 * tombstones deletes events, and the newest event may be one of them, but the recorded mark stays. Only a ledger
 * that went back as a whole (a restored base backup, a standby that had not received the last commits) lowers
 * both.
 */

/** pg_control_system() needs a superuser or pg_monitor-like grants on some installations: absent then, not an error. */
const SYSTEM_SQL = 'SELECT system_identifier::text AS system, (SELECT timeline_id FROM pg_control_checkpoint()) AS checkpoint_timeline FROM pg_control_system()';

export async function serverStanding(db: pg.Pool | pg.ClientBase): Promise<LedgerStanding> {
  const { rows } = await db.query<{ timeline: number | null; recovery: boolean; started: string; host: string; port: number; position: string }>({ name: 'guidgate_standing', text: STANDING_SQL });
  const r = rows[0]!;
  let system: string | null = null;
  let checkpointTimeline: number | null = null;
  try {
    const sys = await db.query<{ system: string; checkpoint_timeline: number }>({ name: 'guidgate_system', text: SYSTEM_SQL });
    system = sys.rows[0]?.system ?? null;
    checkpointTimeline = sys.rows[0]?.checkpoint_timeline ?? null;
  } catch (err) {
    if ((err as { code?: string }).code !== '42501') throw err;
  }
  const timeline = r.timeline ?? checkpointTimeline;
  const started = Number(r.started);
  const position = Number(r.position);
  return {
    server: `pg:${system ?? '?'}/timeline ${timeline ?? '?'}`,
    instance: `${r.host}:${r.port}@${started}`,
    position,
    canChange: true,
    seen: { systemIdentifier: system, timeline, inRecovery: r.recovery ? 1 : 0, postmasterStartedAt: started, host: r.host, port: r.port, position },
  };
}

/**
 * Each key looked up in the log's `(guid, seq)` key on its own, so that a plan made on a new log does not scan it
 * (ledgerQueries.ts, GET_LEDGERS_SQL): a `NOT EXISTS` becomes an anti-join, planned there as a scan of `events`.
 */
export const MISSING_EVENTS_SQL = `SELECT k.guid, k.seq FROM unnest($1::text[], $2::int[]) AS k(guid, seq)
           LEFT JOIN LATERAL (SELECT 1 AS found FROM events e WHERE e.guid = k.guid AND e.seq = k.seq LIMIT 1) AS f ON true
           WHERE f.found IS NULL`;

/** Of `keys`, the events the log does not have. */
export async function missingServerEvents(db: pg.Pool | pg.ClientBase, keys: readonly EventKey[]): Promise<EventKey[]> {
  if (keys.length === 0) return [];
  const { rows } = await db.query<{ guid: string; seq: number }>({
    name: 'guidgate_missing_events',
    text: MISSING_EVENTS_SQL,
    values: [keys.map((k) => k.guid), keys.map((k) => k.seq)],
  });
  return rows.map((r) => ({ guid: r.guid, seq: Number(r.seq) }));
}

const TIMELINE = /^pg:(\d+|\?)\/timeline (\d+)$/;

/**
 * The mark the relays recorded in the ledger: the high-water row (the highest position any relay's check saw,
 * the server it had judged) and the window that ends last. A restore of the database brings these back with the
 * ledger: they carry what a relay did not watch (a restart, a failover while it was down) to the relays that
 * start later, not a witness of the ledger against itself.
 */
export async function readServerMark(db: pg.Pool | pg.ClientBase): Promise<ContinuityMark | null> {
  const high = await db.query<{ position: string; server: string | null; at: string }>({
    name: 'guidgate_read_high_water',
    text: 'SELECT position, server, at FROM continuity_high_water',
  });
  const win = await db.query<{ opened_at: string; ends_at: string; why: string | null; standing: Record<string, unknown> | null }>({
    name: 'guidgate_read_window',
    text: 'SELECT opened_at, ends_at, why, standing FROM continuity_windows ORDER BY ends_at DESC, opened_at DESC LIMIT 1',
  });
  const h = high.rows[0];
  const w = win.rows[0];
  if (h === undefined && w === undefined) return null;
  const window = w === undefined
    ? undefined
    : { wentBackAt: Number(w.opened_at), endsAt: Number(w.ends_at), ...(w.why === null ? {} : { why: w.why }), ...(w.standing === null ? {} : { seen: w.standing }) };
  return {
    position: h === undefined ? 0 : Number(h.position),
    at: h === undefined ? Number(w!.opened_at) : Number(h.at),
    ...(h?.server == null ? {} : { server: h.server }),
    ...(window === undefined ? {} : { window }),
  };
}

/**
 * Records a relay's mark: the high-water row only ever raised (several relays write it; the log's newest event
 * named beside it), the server the relay judged, and its window if one is open (once per window; never removed:
 * a window that ended is past, whoever reads it). One transaction.
 */
export async function writeServerMark(db: pg.Pool, mark: ContinuityMark, syncWarned = false): Promise<void> {
  // Written only on the server the relay judged: a mark whose standing was read on the old primary and that reaches
  // the promoted one (the address switched in between) would say the old timeline was seen on the new one.
  const judged = mark.server === undefined ? null : TIMELINE.exec(mark.server);
  const timeline = judged == null ? null : Number(judged[2]);
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    await client.query({
      name: 'guidgate_write_high_water',
      text: `INSERT INTO continuity_high_water AS h (id, position, server, last_guid, last_seq, at)
             SELECT true, greatest($1::bigint, coalesce(max(e.position), 0)), $2, (array_agg(e.guid))[1], (array_agg(e.seq))[1], $3
               FROM (SELECT position, guid, seq FROM events ORDER BY position DESC LIMIT 1) AS e
             HAVING $4::int IS NULL OR ${CURRENT_TIMELINE_SQL} = $4::int
             ON CONFLICT (id) DO UPDATE SET
               position  = greatest(h.position, excluded.position),
               server    = excluded.server,
               last_guid = CASE WHEN excluded.position >= h.position THEN excluded.last_guid ELSE h.last_guid END,
               last_seq  = CASE WHEN excluded.position >= h.position THEN excluded.last_seq ELSE h.last_seq END,
               at        = greatest(h.at, excluded.at)`,
      values: [mark.position, mark.server ?? null, mark.at, timeline],
    });
    if (mark.relay !== undefined && mark.server !== undefined) {
      await client.query({ name: 'guidgate_write_relay', text: WRITE_RELAY_SQL, values: [mark.relay, mark.server, mark.at, mark.stopped === true, timeline, syncWarned] });
      await client.query({ name: 'guidgate_retire_relays', text: RETIRE_RELAYS_SQL, values: [mark.relay, mark.server, mark.at, RETIRE_AFTER_MS, FORGET_AFTER_MS] });
    }
    if (mark.window !== undefined) {
      await client.query({
        name: 'guidgate_write_window',
        text: `INSERT INTO continuity_windows (opened_at, ends_at, why, standing) VALUES ($1, $2, $3, $4)
               ON CONFLICT (opened_at, ends_at) DO NOTHING`,
        values: [mark.window.wentBackAt, mark.window.endsAt, mark.window.why ?? null, mark.window.seen === undefined ? null : JSON.stringify(mark.window.seen)],
      });
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/**
 * Synchronous replication in force for this session's commits, as far as PostgreSQL shows it: `synchronous_commit`
 * `on` or `remote_apply` (a commit returns once a synchronous standby has flushed it), a non-empty
 * `synchronous_standby_names`, and a standby streaming as `sync` or `quorum` (a role without `pg_read_all_stats`
 * sees `sync_state` NULL: never attested then).
 */
const CURRENT_TIMELINE_SQL = `(CASE WHEN pg_is_in_recovery() THEN NULL ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END)`;

const SYNC_ATTESTED_SQL = `(current_setting('synchronous_commit') IN ('on', 'remote_apply')
   AND current_setting('synchronous_standby_names') <> ''
   AND EXISTS (SELECT 1 FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')))`;

/** One relay's row: the server it judged, when, whether synchronous replication was in force then, a clean stop. */
const WRITE_RELAY_SQL = `
  INSERT INTO continuity_relays (relay, server, checked_at, sync_attested, stopped)
  SELECT $1, $2, $3, ${SYNC_ATTESTED_SQL} AND NOT $6::boolean, $4 WHERE $5::int IS NULL OR ${CURRENT_TIMELINE_SQL} = $5::int
  ON CONFLICT (relay) DO UPDATE SET server = excluded.server, checked_at = excluded.checked_at,
    sync_attested = excluded.sync_attested, stopped = excluded.stopped, retired = false`;

/**
 * A relay that wrote nothing on this server for `RETIRE_AFTER_MS` acknowledged nothing since (a relay writes its
 * row at its next check after the log moved): what it did acknowledge was committed before this write, so this
 * write surviving a failover proves its writes did. It writes its row again (no longer retired) at its next check
 * after acknowledging something. Rows of relays gone for a day are forgotten.
 */
const RETIRE_RELAYS_SQL = `
  WITH retired AS (
    UPDATE continuity_relays SET retired = true
     WHERE relay <> $1 AND server = $2 AND NOT stopped AND NOT retired AND checked_at < $3 - $4::bigint)
  DELETE FROM continuity_relays WHERE relay <> $1 AND (stopped OR retired OR server <> $2) AND checked_at < $3 - $5::bigint`;

const RETIRE_AFTER_MS = 30_000;
const FORGET_AFTER_MS = 86_400_000;
/** How long a relay waits for the others running on the old server to vouch for their own writes. */
const VOUCH_WAIT_MS = 5_000;
const VOUCH_POLL_MS = 100;


interface RelayRow {
  relay: string;
  server: string;
  sync_attested: boolean;
  stopped: boolean;
  retired: boolean;
  vouched: string | null;
  vouch_ok: boolean | null;
}

/**
 * Whether another timeline of the same cluster lost nothing any relay acknowledged (CONTRACT.md §9, "a lossless
 * failover opens no window"). The argument: WAL is one sequence and a promoted standby keeps a prefix of it, so a
 * row committed on the old timeline and present on the new one proves everything committed before it is present.
 * - Every relay writes its row (this file's `WRITE_RELAY_SQL`) at each check after the log moved: the row's
 *   survival proves that relay's writes acknowledged before that check survived.
 * - What a running relay acknowledged after its last surviving row it checks itself on the new timeline (its
 *   recently acknowledged events all present, the log not behind what it saw) and records that (`vouched`).
 * - A relay that stopped cleanly acknowledged nothing after its last row; one idle for long was retired by a later
 *   write of another relay (RETIRE_RELAYS_SQL).
 * - What no row can show (a relay whose every row was lost: it started in the last moments; a retired relay that
 *   acknowledged again in the last moments) is covered by synchronous replication, which every row attests.
 * Trusted iff: same system identifier, another timeline; the high-water mark recorded on the old timeline or this
 * one (no timeline in between unjudged); at least one row on the old timeline, every one attesting synchronous
 * replication; every one stopped, retired, or vouched for its own writes on this timeline within VOUCH_WAIT_MS;
 * none found its own writes missing. Anything else, or any doubt: not trusted (the window opens).
 */
export async function judgeServerChange(db: pg.Pool, change: ServerChange, at: number): Promise<{ trusted: boolean; why: string }> {
  const before = TIMELINE.exec(change.before);
  const now = TIMELINE.exec(change.now);
  if (before === null || now === null || before[1] === '?' || before[1] !== now[1] || before[2] === now[2]) {
    return { trusted: false, why: 'another cluster, or a system identifier this role cannot read' };
  }
  if (change.hasOwn) {
    await db.query({
      name: 'guidgate_vouch',
      text: `INSERT INTO continuity_relays (relay, server, checked_at, sync_attested, vouched, vouch_ok) VALUES ($1, $2, $3, false, $4, $5)
             ON CONFLICT (relay) DO UPDATE SET vouched = $4, vouch_ok = $5`,
      values: [change.relay, change.before, at, change.now, change.ownLost === null],
    });
    if (change.ownLost !== null) return { trusted: false, why: `this relay's own acknowledged writes are not shown all there: ${change.ownLost}` };
  }
  const high = await db.query<{ server: string | null }>('SELECT server FROM continuity_high_water');
  const recorded = high.rows[0]?.server ?? null;
  if (recorded !== change.before && recorded !== change.now) {
    return { trusted: false, why: `the relays last recorded ${recorded ?? 'no server'}, neither the old nor the new timeline` };
  }
  const deadline = performance.now() + VOUCH_WAIT_MS;
  for (;;) {
    const { rows } = await db.query<RelayRow>({
      name: 'guidgate_relays_on',
      text: 'SELECT relay, server, sync_attested, stopped, retired, vouched, vouch_ok FROM continuity_relays WHERE server = $1 OR vouched = $2',
      values: [change.before, change.now],
    });
    const onBefore = rows.filter((r) => r.server === change.before);
    if (onBefore.length === 0) return { trusted: false, why: 'no relay recorded synchronous replication on the old timeline' };
    const lossy = rows.find((r) => r.vouched === change.now && r.vouch_ok === false);
    if (lossy !== undefined) return { trusted: false, why: `relay ${lossy.relay} found its own acknowledged writes missing` };
    const unattested = onBefore.find((r) => !r.sync_attested);
    if (unattested !== undefined) return { trusted: false, why: `relay ${unattested.relay} did not see synchronous replication in force at its last check on the old timeline` };
    const pending = onBefore.filter((r) => !r.stopped && !r.retired && !(r.vouched === change.now && r.vouch_ok === true));
    if (pending.length === 0) {
      return {
        trusted: true,
        why: `timeline ${before[2]} → ${now[2]} of the same cluster: each of the ${onBefore.length} relays recorded on the old timeline had synchronous replication in force at its last check, and each vouched for its own acknowledged writes, stopped cleanly or was idle long before`,
      };
    }
    if (performance.now() >= deadline) return { trusted: false, why: `relay ${pending.map((r) => r.relay).join(', ')} did not vouch for its own writes within ${VOUCH_WAIT_MS / 1000} s (stopped uncleanly or cut off?)` };
    await new Promise((r) => setTimeout(r, VOUCH_POLL_MS));
  }
}
