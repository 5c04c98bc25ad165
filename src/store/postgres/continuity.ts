import type pg from 'pg';
import type { EventKey, LedgerStanding } from '../../events/store.js';

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
         (SELECT coalesce(max(position), 0) FROM events) AS position`;

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

/** Of `keys`, the events the log does not have. */
export async function missingServerEvents(db: pg.Pool | pg.ClientBase, keys: readonly EventKey[]): Promise<EventKey[]> {
  if (keys.length === 0) return [];
  const { rows } = await db.query<{ guid: string; seq: number }>({
    name: 'guidgate_missing_events',
    text: `SELECT k.guid, k.seq FROM unnest($1::text[], $2::int[]) AS k(guid, seq)
           WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.guid = k.guid AND e.seq = k.seq)`,
    values: [keys.map((k) => k.guid), keys.map((k) => k.seq)],
  });
  return rows.map((r) => ({ guid: r.guid, seq: Number(r.seq) }));
}
