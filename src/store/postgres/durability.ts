import type pg from 'pg';
import type { DurabilityReport } from '../../events/store.js';

/**
 * The durability report (CONTRACT.md §9): what the primary's settings and its replication say about whether a
 * commit it acknowledged is on a standby too. `pg_stat_replication` shows a user without pg_read_all_stats (or
 * superuser) each standby's row but not its `sync_state`: then the counts are null (unknown), never 0.
 */
export async function readDurability(pool: pg.Pool, hosts: number): Promise<DurabilityReport> {
  const { rows } = await pool.query<{ commit: string; names: string; sync: number; total: number; hidden: number }>({
    name: 'guidgate_durability',
    text: `SELECT current_setting('synchronous_commit') AS commit, current_setting('synchronous_standby_names') AS names,
             (SELECT count(*) FILTER (WHERE sync_state IN ('sync', 'quorum'))::int FROM pg_stat_replication) AS sync,
             (SELECT count(*)::int FROM pg_stat_replication) AS total,
             (SELECT count(*) FILTER (WHERE sync_state IS NULL)::int FROM pg_stat_replication) AS hidden`,
  });
  const r = rows[0]!;
  const visible = r.hidden === 0;
  return { synchronousCommit: r.commit, synchronousStandbyNames: r.names, synchronousStandbys: visible ? r.sync : null, standbys: visible ? r.total : null, hosts };
}
