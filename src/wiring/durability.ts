import * as E from 'fp-ts/lib/Either.js';
import { LedgerUnavailableError } from '../events/errors.js';
import type { DurabilityReport, EventStore } from '../events/store.js';
import { storeResult } from '../events/storeResult.js';
import { recordsSent } from '../store/shared/writeDeadline.js';

/** How often `serve` reads the durability report (CONTRACT.md §9: at start, then every minute). */
export const DURABILITY_EVERY_MS = 60_000;
/** With --require-sync-standby, while there is none: read again this often, so that transfers resume soon after one is back. */
export const DURABILITY_RECHECK_MS = 5_000;

/** Whether commits wait for a synchronous standby: one is named, one is synchronous now, and synchronous_commit waits for it. */
export function waitsForStandby(r: DurabilityReport): boolean {
  return r.synchronousStandbyNames.trim() !== '' && (r.synchronousStandbys ?? 0) > 0 && !['off', 'local'].includes(r.synchronousCommit);
}

/**
 * Why a failover could lose acknowledged writes, or null: only where a failover is to be expected (several hosts
 * in --db, or standbys streaming from this server) and commits do not wait for a synchronous standby.
 */
export function failoverRisk(r: DurabilityReport): string | null {
  if (r.hosts < 2 && (r.standbys ?? 0) === 0) return null;
  if (waitsForStandby(r)) return null;
  const why =
    r.synchronousStandbyNames.trim() === ''
      ? 'synchronous_standby_names is empty (replication is asynchronous)'
      : ['off', 'local'].includes(r.synchronousCommit)
        ? `synchronous_commit is ${r.synchronousCommit} (commits do not wait for the standby)`
        : r.synchronousStandbys === null
          ? 'no synchronous standby is visible to this user (pg_stat_replication needs pg_read_all_stats)'
          : 'no standby is synchronous now (pg_stat_replication)';
  return `a failover could lose acknowledged claims: ${why}; a claim lost that way is sent again on the channel's resend`;
}

export interface DurabilityWatch {
  /** Null when new transfers may go ahead; else why not (--require-sync-standby and no synchronous standby). */
  refusal(): string | null;
  stop(): void;
}

/**
 * The durability report of `serve` on PostgreSQL: read at start and every minute, `report` given each reading (the
 * gauge), `warn` once at start when a failover could lose acknowledged writes. With `require`, while no
 * synchronous standby is seen (or the report cannot be read) `refusal()` says why, read again every few seconds.
 * Null for a store without standbys (SQLite).
 */
export async function watchDurability(
  store: EventStore,
  o: { require: boolean; report: (r: DurabilityReport | null) => void; warn: (message: string, r: DurabilityReport) => void; error: (message: string) => void; everyMs?: number; recheckMs?: number },
): Promise<DurabilityWatch | null> {
  const read = store.durability;
  if (read === undefined) return null;
  let refusal: string | null = null;
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  const take = async (): Promise<DurabilityReport | null> => {
    const r = await read();
    if (E.isLeft(r)) {
      o.report(null);
      refusal = o.require ? `no synchronous standby can be confirmed (--require-sync-standby): ${r.left.message}` : null;
      return null;
    }
    o.report(r.right);
    refusal = o.require && !waitsForStandby(r.right) ? `no synchronous standby (--require-sync-standby): ${failoverRisk({ ...r.right, hosts: Math.max(2, r.right.hosts) })}` : null;
    return r.right;
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => void take().then(schedule, schedule), refusal !== null ? (o.recheckMs ?? DURABILITY_RECHECK_MS) : (o.everyMs ?? DURABILITY_EVERY_MS));
    timer.unref();
  };
  const first = await take();
  if (first === null) o.error('durability report: the replication settings could not be read');
  else {
    const risk = failoverRisk(first);
    if (risk !== null) o.warn(risk, first);
  }
  schedule();
  return {
    refusal: () => refusal,
    stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
    },
  };
}

/**
 * The store `serve` works on with --require-sync-standby: a write that records a Sent (a claim, a resend) and the
 * ping fail as the ledger unavailable while `refusal()` says why, so a new transfer gets E503 with nothing
 * written or called, and /healthz is 503. Everything else (replays, outcomes, inquiries) goes through.
 */
export function gatedStore(store: EventStore, refusal: () => string | null): EventStore {
  const refused = (): LedgerUnavailableError | null => {
    const why = refusal();
    return why === null ? null : new LedgerUnavailableError(why);
  };
  return {
    ...store,
    execute(guid, command, ...rest) {
      const err = recordsSent(command) ? refused() : null;
      return err === null ? store.execute(guid, command, ...rest) : storeResult('write', () => Promise.reject(err));
    },
    ping() {
      const err = refused();
      return err === null ? store.ping() : storeResult('ping', () => Promise.reject(err));
    },
  };
}
