import * as E from 'fp-ts/lib/Either.js';
import { ledgerTime } from '../events/policy.js';
import type { StoreError } from '../events/errors.js';
import type { EventKey, EventStore, LedgerStanding, StoreResult } from '../events/store.js';

/**
 * The continuity guard of one `serve` (CONTRACT.md §9): it notices the ledger going back under it, for itself (no
 * relay relies on another having noticed), and then keeps a window open during which every GUID the ledger does not
 * know is inquired about before its first send (the rule: `claimAfterInquiry` in resendAfterInquiry.ts, `decide`'s
 * `firstSendAfterInquiry`).
 *
 * What counts as going back:
 * - another server or timeline under the connection (`LedgerStanding.server`: a promoted standby writes on a new
 *   timeline; another cluster has another system identifier);
 * - any of this relay's recently acknowledged events missing (a ring of the last ones, checked when the instance
 *   changes: a restart or another host, when a ledger call failed since the last check, and every few checks);
 * - (SQLite) the file behind the position `serve` last recorded beside it (`readMark`): restored from an older copy.
 * A restart of the same server on the same timeline with every recent event present is not a going back.
 */

export interface ContinuityLog {
  info(line: Record<string, unknown>, message: string): void;
  error(line: Record<string, unknown>, message: string): void;
}

export interface ContinuityOptions {
  /** How long the window stays open after a going back (`--continuity-window`); 0: detected and logged, no window. */
  readonly windowMs: number;
  /** How often the standing is read (and the mark written when the log moved). */
  readonly checkEveryMs?: number;
  /** Every this many checks, the recent events are checked even when nothing else changed. */
  readonly ringEvery?: number;
  /** How many recently acknowledged events are kept to check. */
  readonly ringSize?: number;
  /** What the window's ends are judged by; default the ledger's clock. */
  readonly clock?: (() => number | Promise<number>) | undefined;
}

/** How `/v1/stats` and the console show the guard. */
export type ContinuityView =
  | { readonly state: 'off'; readonly breaks: number; readonly lastBreak: ContinuityBreak | null }
  | { readonly state: 'watching'; readonly breaks: number; readonly lastBreak: ContinuityBreak | null }
  | { readonly state: 'window'; readonly breaks: number; readonly wentBackAt: number; readonly endsAt: number; readonly lastBreak: ContinuityBreak | null };

export interface ContinuityBreak {
  readonly at: number;
  readonly why: string;
}

/** What the send path asks before claiming a GUID the ledger does not know. */
export interface ContinuityGate {
  /**
   * `window` null: claim as usual; else the window is open: inquire first (the ledger went back at `wentBackAt`).
   * `breaks`: how many goings back this guard had seen, for `afterFirstClaim`.
   */
  beforeFirstClaim(): StoreResult<{ readonly window: { readonly wentBackAt: number } | null } & ClaimGate>;
  /**
   * After a GUID the ledger did not know was claimed (in the window or not), before it is sent: where the server can
   * change under the connection, a check that started after the claim was acknowledged (shared by the claims
   * waiting at the time) says whether the claim went to the server known. `true`: send; `false`: the ledger went back
   * since `beforeFirstClaim` (`breaks` is what it said), or could not be checked, so the claim may stand on a server
   * that forgot earlier claims: not sent.
   */
  afterFirstClaim(before: ClaimGate): Promise<boolean>;
}

/** What the guard had seen when it let a claim through: goings back, and the store's connection events at that check. */
export interface ClaimGate {
  readonly breaks: number;
  readonly connections: number;
}

export interface ContinuityGuard extends ContinuityGate {
  /** The store as the relay, settler and sweeper should use it: acknowledged events are remembered, failures noted. */
  readonly store: EventStore;
  view(): ContinuityView;
  /** Reads the standing now (the timer does it every `checkEveryMs`); a Left when the ledger did not answer. */
  check(): StoreResult<void>;
  /** Stops the timer and records the mark (a clean stop). */
  stop(): Promise<void>;
}

const DEFAULT_CHECK_EVERY_MS = 1000;
const DEFAULT_RING_EVERY = 10;
const DEFAULT_RING_SIZE = 256;

/**
 * Starts the guard on an opened store: the first standing is the one trusted, compared with the mark beside the
 * ledger (SQLite); a window the mark says is still open is continued. Fails (Left) when the ledger does not answer.
 */
export async function startContinuityGuard(inner: EventStore, log: ContinuityLog, metrics: { continuityBreak(): void }, opts: ContinuityOptions): StoreResult<ContinuityGuard> {
  const checkEveryMs = opts.checkEveryMs ?? DEFAULT_CHECK_EVERY_MS;
  const ringEvery = opts.ringEvery ?? DEFAULT_RING_EVERY;
  const ringSize = opts.ringSize ?? DEFAULT_RING_SIZE;
  const now = (): StoreResult<number> => ledgerTime(inner, opts.clock);

  const ring: EventKey[] = [];
  const remember = (key: EventKey): void => {
    ring.push(key);
    if (ring.length > ringSize) ring.splice(0, ring.length - ringSize);
  };
  let known: LedgerStanding | null = null;
  /** A ledger call failed since the last check: the next claim of an unknown GUID waits for a check. */
  let suspect = false;
  /** When (monotonic) a check last read the standing: a first claim waits for a check when it is older than twice the period. */
  let checkedAt = performance.now();
  /** The store's connection events as the last check that read the standing started: moved since, a new server may answer. */
  let connectionsChecked = inner.connectionEvents();
  let checks = 0;
  let breaks = 0;
  let lastBreak: ContinuityBreak | null = null;
  let window: { wentBackAt: number; endsAt: number } | null = null;
  let markedPosition = -1;

  const first = await inner.ledgerStanding();
  if (E.isLeft(first)) return first;
  known = first.right;
  const mark = await inner.readMark();
  if (E.isLeft(mark)) return mark;
  const started = await now();
  if (E.isLeft(started)) return started;
  if (mark.right !== null) {
    const m = mark.right;
    if (known.position < m.position) {
      await wentBack(started.right, 'the ledger is behind the position serve last recorded beside it: restored from an older copy?', {
        recordedPosition: m.position, recordedAt: m.at, position: known.position, ...known.seen,
      });
    } else if (m.window !== undefined && m.window.endsAt > started.right && opts.windowMs > 0) {
      window = { ...m.window };
      log.info({ wentBackAt: m.window.wentBackAt, endsAt: m.window.endsAt }, 'continuity window still open from before the restart: every GUID the ledger does not know is inquired about before its first send');
    }
  }
  const firstMark = await writeMark(started.right);
  if (E.isLeft(firstMark)) return firstMark;

  async function writeMark(at: number): StoreResult<void> {
    const position = known?.position ?? 0;
    const written = await inner.writeMark({ position, at, ...(window === null ? {} : { window }) });
    if (E.isRight(written)) markedPosition = position;
    return written;
  }

  async function wentBack(at: number, why: string, seen: Record<string, unknown>): Promise<void> {
    breaks++;
    lastBreak = { at, why };
    metrics.continuityBreak();
    if (opts.windowMs <= 0) {
      log.error({ ...seen, why }, `the ledger went back (${why}); --continuity-window is 0: trusting the database, GUIDs it does not know are sent as usual`);
      return;
    }
    const endsAt = Math.max(at + opts.windowMs, window?.endsAt ?? 0);
    window = { wentBackAt: at, endsAt };
    log.error(
      { ...seen, why, wentBackAt: at, windowEndsAt: endsAt },
      `the ledger went back (${why}): until ${new Date(endsAt).toISOString()} every GUID it does not know is inquired about before its first send`,
    );
    await inner.writeMark({ position: known?.position ?? 0, at, window });
  }

  let running: Promise<E.Either<StoreError, void>> | null = null;
  /** One check at a time; a caller arriving during one waits for it. */
  function check(): StoreResult<void> {
    running ??= runCheck().finally(() => {
      running = null;
    });
    return running;
  }
  let next: Promise<E.Either<StoreError, void>> | null = null;
  /** A check that starts after this call: the one running (started earlier) is waited for, then one more, shared. */
  function checkStartingNow(): StoreResult<void> {
    if (running === null) return check();
    next ??= running.then(() => {
      next = null;
      return check();
    });
    return next;
  }

  async function runCheck(): StoreResult<void> {
    const recent = ring.slice();
    const connections = inner.connectionEvents();
    const wasSuspect = suspect;
    const read = await inner.ledgerStanding();
    if (E.isLeft(read)) {
      suspect = true;
      return read;
    }
    const standing = read.right;
    const before = known!;
    checkedAt = performance.now();
    connectionsChecked = connections;
    checks++;
    if (standing.server !== before.server) {
      const at = await now();
      if (E.isLeft(at)) {
        suspect = true;
        return at;
      }
      known = standing;
      // What the ring holds was acknowledged by the server before: lost or not, it is not this server's to check.
      ring.length = 0;
      await wentBack(at.right, 'another server or timeline answers under the connection', { before: before.seen, now: standing.seen });
    } else if (standing.instance !== before.instance || wasSuspect || checks % ringEvery === 0) {
      const missing = await inner.missingEvents(recent);
      if (E.isLeft(missing)) {
        suspect = true;
        return missing;
      }
      known = standing;
      if (missing.right.length > 0) {
        const at = await now();
        if (E.isLeft(at)) {
          suspect = true;
          return at;
        }
        ring.length = 0;
        await wentBack(at.right, `${missing.right.length} of this relay's ${recent.length} most recently acknowledged events are missing`, {
          missing: missing.right.slice(0, 5), before: before.seen, now: standing.seen,
        });
      } else if (standing.instance !== before.instance) {
        log.info({ before: before.seen, now: standing.seen, checked: recent.length }, 'the ledger server restarted or another host answers; every recently acknowledged event is there: no going back');
      }
    } else {
      known = standing;
    }
    suspect = false;
    if (standing.position !== markedPosition) {
      const at = await now();
      if (E.isRight(at)) await writeMark(at.right);
    }
    return E.right(undefined);
  }

  const timer = setInterval(() => void check(), checkEveryMs);
  timer.unref();

  /** Remembers the last event of an acknowledged write; a failure makes the next first claim wait for a check. */
  const watchedResult = async <T>(result: StoreResult<T>, lastEvent: (value: T) => EventKey | null): StoreResult<T> => {
    const r = await result;
    if (E.isLeft(r)) suspect = true;
    else {
      const key = lastEvent(r.right);
      if (key !== null) remember(key);
    }
    return r;
  };
  const lastOf = (events: readonly { guid: string; seq: number }[]): EventKey | null => {
    const e = events[events.length - 1];
    return e === undefined ? null : { guid: e.guid, seq: e.seq };
  };
  const store: EventStore = {
    ...inner,
    execute: (...a) => watchedResult(inner.execute(...a), (r) => (r.kind === 'applied' ? lastOf(r.events) : null)),
    appendEvents: (...a) => watchedResult(inner.appendEvents(...a), (r) => (r.won ? lastOf(r.events) : null)),
    getLedger: (...a) => watchedResult(inner.getLedger(...a), () => null),
  };

  async function inWindow(): StoreResult<{ wentBackAt: number } | null> {
    if (window === null) return E.right(null);
    const at = await now();
    if (E.isLeft(at)) return at;
    if (at.right >= window.endsAt) {
      log.info({ wentBackAt: window.wentBackAt, endedAt: window.endsAt }, 'continuity window ended: GUIDs the ledger does not know are sent as usual again');
      window = null;
      await writeMark(at.right);
      return E.right(null);
    }
    return E.right({ wentBackAt: window.wentBackAt });
  }

  return E.right({
    store,
    check,
    async afterFirstClaim(before: { readonly breaks: number; readonly connections: number }) {
      if (opts.windowMs <= 0) return true;
      const breaksBefore = before.breaks;
      // No connection opened or lost since the check the gate relied on: the claim went to the server checked.
      if (!known!.canChange || (inner.connectionEvents() === before.connections && !suspect)) return breaks === breaksBefore;
      const checked = await checkStartingNow();
      return E.isRight(checked) && breaks === breaksBefore;
    },
    async beforeFirstClaim() {
      // After a failed ledger call (a failover under way?) nothing new is claimed until the server is checked.
      // So does one after the checks stopped succeeding (a failover faster than a failed call would show).
      // And one on a connection opened or lost since the last check (a new server answers only on a new connection).
      if (suspect || inner.connectionEvents() !== connectionsChecked || performance.now() - checkedAt > 2 * checkEveryMs) {
        const checked = await check();
        if (E.isLeft(checked)) return checked;
      }
      const seen = breaks;
      const open = await inWindow();
      return E.isLeft(open) ? open : E.right({ window: open.right, breaks: seen, connections: connectionsChecked });
    },
    view(): ContinuityView {
      if (opts.windowMs <= 0) return { state: 'off', breaks, lastBreak };
      return window === null ? { state: 'watching', breaks, lastBreak } : { state: 'window', breaks, wentBackAt: window.wentBackAt, endsAt: window.endsAt, lastBreak };
    },
    async stop() {
      clearInterval(timer);
      // The last check records where the log stands now (a clean stop leaves the mark current).
      await check();
    },
  });
}
