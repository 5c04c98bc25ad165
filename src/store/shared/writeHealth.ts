import { LedgerClosedError, LedgerUnavailableError } from '../../events/errors.js';

/**
 * How long the outcome of the last ledger write (a transfer's batch, a settle run's lease, a request record, or a
 * probe) stands for the next one: a store's ping answers from it instead of writing again. /healthz is public, so
 * without this every request to it would cost a write and a sync to disk; with it, a flood of health checks costs
 * at most one probe per second, and under traffic none at all.
 */
export const WRITE_EVIDENCE_FRESH_MS = 1000;

/**
 * Whether the next ledger write would go through (CONTRACT.md §2 v2: /healthz is 200 only when a new transfer
 * would not get E503 now), judged by what writes meet rather than by what a write that changes nothing meets:
 * a full disk, for one, fails only a write that needs new space. The freshest evidence wins: the outcome of the
 * latest write that settled, whoever made it, while it is younger than `freshMs`; once older, a probe (at most one
 * at a time, its outcome shared by every check waiting for it) decides. So a batch that just failed makes the
 * ledger unhealthy at once, and the next write that goes through (a transfer's or the probe's) makes it healthy.
 */
export interface WriteHealth {
  /** Notes how `write` settled (failures of the ledger only: not a unit's own problem); gives it back unchanged. */
  watch<T>(write: Promise<T>): Promise<T>;
  /** Resolves when a write would go through now; rejects with a LedgerUnavailableError saying why not. */
  check(): Promise<void>;
}

interface Evidence {
  /** performance.now() when it settled. */
  readonly at: number;
  /** Why the write failed; null: it went through. */
  readonly failure: string | null;
}

/** A failure of the ledger itself (I/O, lock, full disk, file lost, deadline): not closing it ourselves, not a unit's own problem. */
const ledgerFailure = (err: unknown): string | null => (err instanceof LedgerUnavailableError && !(err instanceof LedgerClosedError) ? err.message : null);

export function writeHealth(probe: () => Promise<unknown>, o: { freshMs?: number; clock?: () => number } = {}): WriteHealth {
  const freshMs = o.freshMs ?? WRITE_EVIDENCE_FRESH_MS;
  const clock = o.clock ?? (() => performance.now());
  let latest: Evidence | null = null;
  let probing: Promise<void> | null = null;

  const note = (failure: string | null): void => {
    latest = { at: clock(), failure };
  };
  const watch = <T>(write: Promise<T>): Promise<T> => {
    write.then(
      () => note(null),
      (err: unknown) => {
        const failure = ledgerFailure(err);
        if (failure !== null) note(failure);
      },
    );
    return write;
  };

  return {
    watch,
    async check() {
      const fresh = latest !== null && clock() - latest.at < freshMs;
      if (!fresh) {
        probing ??= probe().then(
          () => note(null),
          (err: unknown) => note(ledgerFailure(err) ?? (err instanceof Error ? err.message : String(err))),
        ).finally(() => (probing = null));
        await probing;
      }
      const failure = latest?.failure ?? null;
      if (failure !== null) throw new LedgerUnavailableError(failure);
    },
  };
}
