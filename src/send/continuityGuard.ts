import * as E from 'fp-ts/lib/Either.js';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import {
  begin, checkBeforeClaim, checkStep, claimStands, decide, markFinding, ownWritesLost, sameSince, viewOf,
  type Action, type ClaimGate, type ContinuityView, type Found, type GuardSettings, type GuardState, type Observation, type ServerJudged,
} from '../events/continuity.js';
import { ledgerTime } from '../events/policy.js';
import type { StoreError } from '../events/errors.js';
import type { EventKey, EventStore, LedgerStanding, StoreResult } from '../events/store.js';
import { recentWrites, watchOwnWrites } from './ownWrites.js';

export type { ClaimGate, ContinuityView };

/**
 * The continuity guard of one `serve` (CONTRACT.md §9): it notices the ledger going back under it, for itself (no
 * relay relies on another having noticed), and then keeps a window open during which every GUID the ledger does not
 * know is inquired about before its first send, and so is every resend the ledger would make without an inquiry of
 * its own (a row FAILED by a definite not-sent answer): one rule, `decide`'s `firstSendAfterInquiry` (callers:
 * `claimAfterInquiry` and `resendAfterInquiry` in resendAfterInquiry.ts).
 *
 * What counts as going back:
 * - another server or timeline under the connection (`LedgerStanding.server`: a promoted standby writes on a new
 *   timeline; another cluster has another system identifier);
 * - any of this relay's recently acknowledged events missing (a ring of the last ones, checked when the instance
 *   changes: a restart or another host, when a ledger call failed since the last check, and every few checks);
 * - (SQLite, at start) the file behind the mark `serve` and the writing commands keep apart from it, judged by the
 *   store (`readMark`'s `judged`: the event at the marked position missing or another, no mark for a ledger with
 *   history, or `guidgate restore` recorded): restored from an older copy.
 * - (a server) the log's highest position fallen below what this relay saw: the whole ledger went back (a base
 *   backup restored on the same timeline), whoever's writes were lost;
 * - (a server) at start, another server than the one the relays last recorded in the ledger (`readMark`): a
 *   failover while this relay was not watching.
 * A restart of the same server on the same timeline with every recent event present is not a going back. Nor is
 * another server the store shows lost nothing any relay acknowledged (`judgeServerChange`: on PostgreSQL a
 * switchover or a failover to the synchronous standby, src/store/postgres/continuity.ts); then one warning says why.
 *
 * The judgement is src/events/continuity.ts (pure: the state, `decide`, the actions); this shell only reads (the
 * standing, the mark, the time, the missing events, the store's judgement of a server change), feeds what it read
 * to `decide` and runs the actions it returns (count, log, write the mark).
 */

/** Every line of the guard is one an operator must see: at warn or error. */
export interface ContinuityLog {
  warn(line: Record<string, unknown>, message: string): void;
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

/** What the send path asks before claiming a GUID the ledger does not know. */
export interface ContinuityGate {
  /**
   * `window` null: claim as usual; else the window is open: inquire first (the ledger went back at `wentBackAt`).
   * `wentBack`: how many goings back this guard had seen, for `afterFirstClaim`.
   */
  beforeFirstClaim(): StoreResult<{ readonly window: { readonly wentBackAt: number } | null } & ClaimGate>;
  /**
   * After a GUID the ledger did not know was claimed (in the window or not), before it is sent: where the server can
   * change under the connection, a check that started after the claim was acknowledged (shared by the claims
   * waiting at the time) says whether the claim went to the server known. `true`: send; `false`: the ledger went back
   * since `beforeFirstClaim` (`wentBack` is what it said), or could not be checked, so the claim may stand on a
   * server that forgot earlier claims: not sent.
   */
  afterFirstClaim(before: ClaimGate): Promise<boolean>;
}

export interface ContinuityGuard extends ContinuityGate {
  /** The store as the relay, settler and sweeper should use it: acknowledged events are remembered, failures noted. */
  readonly store: EventStore;
  view(): ContinuityView;
  /** Reads the standing now (the timer does it every `checkEveryMs`); a Left when the ledger did not answer. */
  check(): StoreResult<void>;
  /**
   * Another witness showed the ledger went back (the account system's journal, src/wiring/journalWitness.ts): judged
   * as any going back seen here (counted, logged once with `why` and `seen`, the window opened and recorded in the mark).
   */
  wentBackBy(why: string, seen: Record<string, unknown>): StoreResult<void>;
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
  const settings: GuardSettings = {
    windowMs: opts.windowMs,
    checkEveryMs: opts.checkEveryMs ?? DEFAULT_CHECK_EVERY_MS,
    ringEvery: opts.ringEvery ?? DEFAULT_RING_EVERY,
    relay: `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`,
  };
  const now = (): StoreResult<number> => ledgerTime(inner, opts.clock);
  const own = recentWrites(opts.ringSize ?? DEFAULT_RING_SIZE);
  const startedAt = performance.now();
  const startConnections = inner.connectionEvents();

  /** The store's judgement of a server change; not trusted when it has none or could not judge. */
  async function judge(before: string, now: string, hasOwn: boolean, ownLost: string | null): Promise<ServerJudged> {
    if (inner.judgeServerChange === undefined) return { trusted: false, why: 'this store cannot show what another server kept' };
    const judged = await inner.judgeServerChange({ relay: settings.relay, before, now, hasOwn, ownLost });
    return E.isRight(judged) ? judged.right : { trusted: false, why: `could not judge: ${judged.left.message}` };
  }

  const first = await inner.ledgerStanding();
  if (E.isLeft(first)) return first;
  const mark = await inner.readMark();
  if (E.isLeft(mark)) return mark;
  const started = await now();
  if (E.isLeft(started)) return started;
  const finding = markFinding(settings.windowMs, mark.right, first.right, started.right);
  const serverJudged = finding.kind === 'otherServer' ? await judge(finding.recorded, first.right.server, false, null) : null;
  const begun = begin(settings, { standing: first.right, mark: mark.right, at: started.right, mono: performance.now(), checkedAt: startedAt, connections: startConnections, serverJudged });
  let state: GuardState = begun.state;
  // The last mark `begin` asks for is the first standing's: not written, the guard does not start.
  const firstMark = await run(begun.actions);
  if (E.isLeft(firstMark)) return firstMark;

  /**
   * Takes an observation: the next state at once (before anything is awaited, so that what runs meanwhile sees it),
   * then its actions in order. The result is the last mark write's (Right when there was none).
   */
  function apply(o: Observation): StoreResult<void> {
    const d = decide(settings, state, o);
    state = d.state;
    return run(d.actions);
  }

  async function run(actions: readonly Action[]): StoreResult<void> {
    let written: E.Either<StoreError, void> = E.right(undefined);
    for (const a of actions) {
      if (a.kind === 'count') metrics.continuityBreak();
      else if (a.kind === 'log') log[a.level](a.line, a.message);
      else {
        written = await inner.writeMark(a.mark);
        if (E.isRight(written)) void apply({ kind: 'markWritten', position: a.mark.position });
      }
    }
    return written;
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
    const recent = own.recent();
    const connections = inner.connectionEvents();
    const wasSuspect = state.suspect;
    const read = await inner.ledgerStanding();
    if (E.isLeft(read)) {
      await apply({ kind: 'standingUnread' });
      return read;
    }
    const standing = read.right;
    const before = state.known;
    void apply({ kind: 'standingRead', mono: performance.now(), connections });
    const found = await look(checkStep(settings, state, standing, wasSuspect), before, standing, recent);
    await apply({ kind: 'checked', before, standing, found: E.isLeft(found) ? { kind: 'unread' } : found.right, mono: performance.now() });
    if (E.isLeft(found)) return found;
    if (standing.position !== state.markedPosition) {
      const at = await now();
      if (E.isRight(at)) await apply({ kind: 'markDue', at: at.right, mono: performance.now(), stopped: false });
    }
    return E.right(undefined);
  }

  /**
   * The reads the step needs, in order; a Left when one the judgement cannot do without failed. The standing read
   * becomes the reference (`taken`) as soon as what must be read before it was; the recent events are forgotten once
   * judged against a new standing.
   */
  async function look(step: Exclude<Found['kind'], 'unread'>, before: LedgerStanding, standing: LedgerStanding, recent: readonly EventKey[]): StoreResult<Found> {
    const take = (): void => void apply({ kind: 'taken', standing });
    switch (step) {
      case 'server': {
        const at = await now();
        if (E.isLeft(at)) return at;
        take();
        const missing = await inner.missingEvents(recent);
        const ownLost = ownWritesLost(E.isRight(missing) ? missing.right : null, recent.length, before, standing);
        own.forget();
        return E.right({ kind: 'server', at: at.right, judged: await judge(before.server, standing.server, true, ownLost) });
      }
      case 'fell': {
        const at = await now();
        if (E.isLeft(at)) return at;
        take();
        own.forget();
        return E.right({ kind: 'fell', at: at.right });
      }
      case 'recent': {
        const missing = await inner.missingEvents(recent);
        if (E.isLeft(missing)) return missing;
        take();
        if (missing.right.length === 0) return E.right({ kind: 'recent', missing: [], recent: recent.length, at: null });
        const at = await now();
        if (E.isLeft(at)) return at;
        own.forget();
        return E.right({ kind: 'recent', missing: missing.right, recent: recent.length, at: at.right });
      }
      case 'same':
        take();
        return E.right({ kind: 'same' });
    }
  }

  const timer = setInterval(() => void check(), settings.checkEveryMs);
  timer.unref();

  const store = watchOwnWrites(inner, { acknowledged: (key) => own.remember(key), failed: () => void apply({ kind: 'callFailed' }) });

  async function inWindow(): StoreResult<{ wentBackAt: number } | null> {
    if (state.window === null) return E.right(null);
    const at = await now();
    if (E.isLeft(at)) return at;
    const d = decide(settings, state, { kind: 'clock', at: at.right, mono: performance.now() });
    state = d.state;
    const open = state.window;
    if (d.actions.length > 0) await run(d.actions);
    return E.right(open === null ? null : { wentBackAt: open.wentBackAt });
  }

  return E.right({
    store,
    check,
    async afterFirstClaim(gate: ClaimGate) {
      const stands = claimStands(settings, state, gate, inner.connectionEvents());
      if (stands !== 'checkFirst') return stands === 'send';
      // A check that fails (no writable host for a moment: a switchover under way) is tried again for up to two
      // periods before the claim is given up as not sent: the send window still bounds how late it may go out.
      const until = performance.now() + 2 * settings.checkEveryMs;
      let checked = await checkStartingNow();
      while (E.isLeft(checked) && sameSince(state, gate) && performance.now() < until) {
        await new Promise((r) => setTimeout(r, Math.min(100, settings.checkEveryMs / 4)));
        checked = await checkStartingNow();
      }
      return E.isRight(checked) && sameSince(state, gate);
    },
    async beforeFirstClaim() {
      // After a failed ledger call (a failover under way?) nothing new is claimed until the server is checked.
      // So does one after the checks stopped succeeding (a failover faster than a failed call would show).
      // And one on a connection opened or lost since the last check (a new server answers only on a new connection).
      if (checkBeforeClaim(settings, state, inner.connectionEvents(), performance.now())) {
        const checked = await check();
        if (E.isLeft(checked)) return checked;
      }
      const seen = state.wentBack;
      const open = await inWindow();
      return E.isLeft(open) ? open : E.right({ window: open.right, wentBack: seen, connections: state.connectionsChecked });
    },
    async wentBackBy(why: string, seen: Record<string, unknown>) {
      const at = await now();
      if (E.isLeft(at)) return at;
      await apply({ kind: 'witnessed', at: at.right, mono: performance.now(), why, seen });
      return E.right(undefined);
    },
    view: () => viewOf(settings, state),
    async stop() {
      clearInterval(timer);
      // The last check records where the log stands now (a clean stop leaves the mark current): one that starts
      // now, not one already running (under load its mark write, two fsyncs, can outlast the last transfers); and
      // that this run acknowledges nothing more.
      await checkStartingNow();
      const at = await now();
      if (E.isRight(at) && state.known.canChange) await apply({ kind: 'markDue', at: at.right, mono: performance.now(), stopped: true });
    },
  });
}
