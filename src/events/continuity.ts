import type { ContinuityMark, ContinuityWindow, EventKey, LedgerStanding } from './store.js';

/**
 * The continuity guard's judgement (CONTRACT.md §9) as a pure function of what was observed: is this a going back,
 * which window is open and until when, what the mark says, and may a claim of a GUID the ledger does not know be
 * sent. `begin` judges the first standing against the mark; `decide` takes each later observation and returns the
 * next state and what to do (count, log, write the mark). The shell that reads the ledger and runs the actions is
 * src/send/continuityGuard.ts; what counts as a going back is listed there.
 */

export interface GuardSettings {
  /** How long the window stays open after a going back (`--continuity-window`); 0: detected and logged, no window. */
  readonly windowMs: number;
  /** How often the standing is read: a first claim waits for a check when the last is older than twice this. */
  readonly checkEveryMs: number;
  /** Every this many checks, the recent events are checked even when nothing else changed. */
  readonly ringEvery: number;
  /** This run of this relay, as its row in the ledger names it (PostgreSQL). */
  readonly relay: string;
}

/** One going back: when, and why it was judged one. */
export interface GoingBack {
  readonly at: number;
  readonly why: string;
}

export interface GuardState {
  /** The standing taken as the reference: the next one read is judged against it. */
  readonly known: LedgerStanding;
  /** How many goings back this guard saw, and the last. */
  readonly wentBack: number;
  readonly lastWentBack: GoingBack | null;
  readonly window: ContinuityWindow | null;
  /**
   * The window's end on this process's monotonic clock, set when it opened or was continued here: a wall clock
   * stepped forward (behind at start, then synced) cannot close the window early. The wall-clock end is moved up to
   * match whenever it is read or recorded, so the mark carries it over a restart too.
   */
  readonly heldUntil: number;
  /** The position the last mark written recorded; -1 before the first. */
  readonly markedPosition: number;
  readonly checks: number;
  /** A ledger call failed since the last check: the next claim of an unknown GUID waits for a check. */
  readonly suspect: boolean;
  /** When (monotonic) a check last read the standing. */
  readonly checkedAt: number;
  /** The store's connection events as the last check that read the standing started: moved since, a new server may answer. */
  readonly connectionsChecked: number;
}

/** A store's judgement of another server under the connection (`judgeServerChange`). */
export interface ServerJudged {
  readonly trusted: boolean;
  readonly why: string;
}

export type Action =
  | { readonly kind: 'count' }
  | { readonly kind: 'log'; readonly level: 'warn' | 'error'; readonly line: Record<string, unknown>; readonly message: string }
  | { readonly kind: 'writeMark'; readonly mark: ContinuityMark };

export interface Decision {
  readonly state: GuardState;
  readonly actions: readonly Action[];
}

/** What a check found after it read the standing, by the step `checkStep` named. */
export type Found =
  /** A read the step needed failed (the time, the missing events): nothing judged, the next claim waits for a check. */
  | { readonly kind: 'unread' }
  | { readonly kind: 'server'; readonly at: number; readonly judged: ServerJudged }
  | { readonly kind: 'fell'; readonly at: number }
  /** `at`: read only when some are missing. */
  | { readonly kind: 'recent'; readonly missing: readonly EventKey[]; readonly recent: number; readonly at: number | null }
  | { readonly kind: 'same' };

export type Observation =
  /** A check could not read the standing. */
  | { readonly kind: 'standingUnread' }
  /** A check read the standing (at `mono`, having started when the store had seen `connections` connection events). */
  | { readonly kind: 'standingRead'; readonly mono: number; readonly connections: number }
  /** The standing a check read becomes the reference. */
  | { readonly kind: 'taken'; readonly standing: LedgerStanding }
  /** What the check found, the standing it read against the one known before. */
  | { readonly kind: 'checked'; readonly before: LedgerStanding; readonly standing: LedgerStanding; readonly found: Found; readonly mono: number }
  /** Another witness (the account system's journal) showed the ledger went back. */
  | { readonly kind: 'witnessed'; readonly at: number; readonly mono: number; readonly why: string; readonly seen: Record<string, unknown> }
  /** The time read to ask whether the window is still open. */
  | { readonly kind: 'clock'; readonly at: number; readonly mono: number }
  /** A ledger call through the guarded store failed. */
  | { readonly kind: 'callFailed' }
  /** The mark is to be recorded now (the log moved since the last; a clean stop). */
  | { readonly kind: 'markDue'; readonly at: number; readonly mono: number; readonly stopped: boolean }
  | { readonly kind: 'markWritten'; readonly position: number };

/** What the mark read at start says of the first standing, before any server is asked. */
export type MarkFinding =
  | { readonly kind: 'none' }
  | { readonly kind: 'behind'; readonly why: string; readonly mark: ContinuityMark }
  /** Another server than the one the relays last recorded: judged by the store (`ServerJudged`). */
  | { readonly kind: 'otherServer'; readonly recorded: string; readonly mark: ContinuityMark }
  | { readonly kind: 'windowOpen'; readonly window: ContinuityWindow }
  | { readonly kind: 'current' };

export function markFinding(windowMs: number, mark: ContinuityMark | null, standing: LedgerStanding, at: number): MarkFinding {
  if (mark === null) return { kind: 'none' };
  // The store's judgment first (SQLite compares the log's history with the mark, and a missing mark is unknown standing).
  const why = mark.judged?.why ?? (standing.position < mark.position ? 'the ledger is behind the position serve last recorded: restored from an older copy?' : null);
  if (why !== null) return { kind: 'behind', why, mark };
  if (standing.canChange && mark.server !== undefined && mark.server !== standing.server) return { kind: 'otherServer', recorded: mark.server, mark };
  if (mark.window !== undefined && mark.window.endsAt > at && windowMs > 0) return { kind: 'windowOpen', window: mark.window };
  return { kind: 'current' };
}

/** What the guard read as it started. */
export interface Beginning {
  readonly standing: LedgerStanding;
  readonly mark: ContinuityMark | null;
  /** The time (the window's clock) and the monotonic clock once both were read. */
  readonly at: number;
  readonly mono: number;
  /** The monotonic clock and the store's connection events as the guard started, before anything was read. */
  readonly checkedAt: number;
  readonly connections: number;
  /** The store's judgement, when `markFinding` says another server answers; else null. */
  readonly serverJudged: ServerJudged | null;
}

/**
 * The guard's first state, from the first standing and the mark beside the ledger (the first standing is the one
 * trusted): a going back the mark shows opens the window, a window the mark says is still open is continued, and
 * the mark is then written for the standing as it is.
 */
export function begin(settings: GuardSettings, o: Beginning): Decision {
  const { standing, mark, at, mono } = o;
  const state: GuardState = {
    known: standing, wentBack: 0, lastWentBack: null, window: null, heldUntil: 0, markedPosition: -1,
    checks: 0, suspect: false, checkedAt: o.checkedAt, connectionsChecked: o.connections,
  };
  const judged = judgeMark(settings, state, markFinding(settings.windowMs, mark, standing, at), o);
  const first = markAt(settings, judged.state, at, mono, false);
  return { state: first.state, actions: [...judged.actions, ...first.actions] };
}

function judgeMark(settings: GuardSettings, state: GuardState, finding: MarkFinding, o: Beginning): Decision {
  const { standing, at, mono } = o;
  switch (finding.kind) {
    case 'behind':
      return wentBack(settings, state, at, mono, finding.why, { recordedPosition: finding.mark.position, recordedAt: finding.mark.at, position: standing.position, ...standing.seen });
    case 'otherServer': {
      const seen = { recordedServer: finding.recorded, recordedAt: finding.mark.at, ...standing.seen };
      const server = o.serverJudged ?? { trusted: false, why: 'not judged' };
      return server.trusted
        ? { state, actions: [warn({ ...seen, why: server.why }, `another server or timeline answers than the one the relays last recorded in the ledger; trusted: ${server.why}`)] }
        : wentBack(settings, state, at, mono, `another server or timeline answers than the one the relays last recorded in the ledger, not shown lossless (${server.why}): a failover or restore while this relay was not watching?`, seen);
    }
    case 'windowOpen': {
      const w = finding.window;
      return {
        state: { ...state, window: { ...w }, heldUntil: holdUntil(settings, mono, w.endsAt - at) },
        actions: [warn({ wentBackAt: w.wentBackAt, endsAt: w.endsAt, why: w.why }, 'continuity window still open from before the restart: every GUID the ledger does not know is inquired about before its first send')],
      };
    }
    case 'none':
    case 'current':
      return { state, actions: [] };
  }
}

/** Which reads a check needs after the standing it read: the step `Found` answers. */
export function checkStep(settings: GuardSettings, state: GuardState, standing: LedgerStanding, wasSuspect: boolean): Exclude<Found['kind'], 'unread'> {
  const before = state.known;
  if (standing.server !== before.server) return 'server';
  // Whoever's writes were lost: a relay whose own recent events all survived still sees the log fall.
  if (standing.canChange && standing.position < before.position) return 'fell';
  if (standing.instance !== before.instance || wasSuspect || state.checks % settings.ringEvery === 0) return 'recent';
  return 'same';
}

/**
 * This relay's own writes under another server: null when its recent events are all there and the log is not
 * behind what it saw; else which of the two is not shown, for the log line. A log behind what this relay saw lacks
 * writes that were committed on the old server, whoever made them.
 */
export function ownWritesLost(missing: readonly EventKey[] | null, recent: number, before: LedgerStanding, standing: LedgerStanding): string | null {
  if (missing === null) return 'its recently acknowledged events could not be looked up';
  if (missing.length > 0) return `${missing.length} of its ${recent} recently acknowledged events are missing`;
  if (standing.position < before.position) return `the log reaches position ${standing.position}, below the ${before.position} it saw committed on the old server`;
  return null;
}

export function decide(settings: GuardSettings, state: GuardState, o: Observation): Decision {
  switch (o.kind) {
    case 'standingUnread':
    case 'callFailed':
      return { state: { ...state, suspect: true }, actions: [] };
    case 'standingRead':
      return { state: { ...state, checkedAt: o.mono, connectionsChecked: o.connections, checks: state.checks + 1 }, actions: [] };
    case 'taken':
      return { state: { ...state, known: o.standing }, actions: [] };
    case 'checked':
      return checked(settings, state, o);
    case 'witnessed':
      return wentBack(settings, state, o.at, o.mono, o.why, o.seen);
    case 'clock': {
      if (state.window === null) return { state, actions: [] };
      const held = extendToHeld(state, o.at, o.mono);
      if (o.at < held.window!.endsAt) return { state: held, actions: [] };
      const ended = markAt(settings, { ...held, window: null }, o.at, o.mono, false);
      return {
        state: ended.state,
        actions: [warn({ wentBackAt: held.window!.wentBackAt, endedAt: held.window!.endsAt }, 'continuity window ended: GUIDs the ledger does not know are sent as usual again'), ...ended.actions],
      };
    }
    case 'markDue':
      return markAt(settings, state, o.at, o.mono, o.stopped);
    case 'markWritten':
      return { state: { ...state, markedPosition: o.position }, actions: [] };
  }
}

function checked(settings: GuardSettings, state: GuardState, o: Extract<Observation, { kind: 'checked' }>): Decision {
  const { found } = o;
  if (found.kind === 'unread') return { state: { ...state, suspect: true }, actions: [] };
  const judged = judgeFound(settings, state, o.before, o.standing, found, o.mono);
  return { state: { ...judged.state, suspect: false }, actions: judged.actions };
}

function judgeFound(settings: GuardSettings, state: GuardState, before: LedgerStanding, standing: LedgerStanding, found: Exclude<Found, { kind: 'unread' }>, mono: number): Decision {
  const seen = { before: before.seen, now: standing.seen };
  switch (found.kind) {
    case 'server':
      return found.judged.trusted
        ? { state, actions: [warn({ ...seen, why: found.judged.why }, `another server or timeline answers under the connection; no going back: ${found.judged.why}`)] }
        : wentBack(settings, state, found.at, mono, `another server or timeline answers under the connection, not shown lossless: ${found.judged.why}`, seen);
    case 'fell':
      return wentBack(settings, state, found.at, mono, `the log's highest position fell from ${before.position} to ${standing.position}: the ledger was restored or replaced by an older copy`, seen);
    case 'recent':
      if (found.missing.length > 0 && found.at !== null) {
        return wentBack(settings, state, found.at, mono, `${found.missing.length} of this relay's ${found.recent} most recently acknowledged events are missing`, {
          missing: found.missing.slice(0, 5), ...seen,
        });
      }
      if (standing.instance !== before.instance) {
        return { state, actions: [warn({ ...seen, checked: found.recent }, 'the ledger server restarted or another host answers; every recently acknowledged event is there: no going back')] };
      }
      return { state, actions: [] };
    case 'same':
      return { state, actions: [] };
  }
}

/**
 * A going back: counted and logged once; with a window, it opens (or is moved to start now, never to end earlier),
 * held on the monotonic clock too (`mono`: now on it), and recorded in the mark.
 */
function wentBack(settings: GuardSettings, state: GuardState, at: number, mono: number, why: string, seen: Record<string, unknown>): Decision {
  const counted: GuardState = { ...state, wentBack: state.wentBack + 1, lastWentBack: { at, why } };
  if (settings.windowMs <= 0) {
    return {
      state: counted,
      actions: [{ kind: 'count' }, error({ ...seen, why }, `the ledger went back (${why}); --continuity-window is 0: trusting the database, GUIDs it does not know are sent as usual`)],
    };
  }
  const endsAt = Math.max(at + settings.windowMs, state.window?.endsAt ?? 0);
  const opened: GuardState = { ...counted, window: { wentBackAt: at, endsAt, why, seen }, heldUntil: holdUntil(settings, mono, settings.windowMs) };
  const marked = markAt(settings, opened, at, mono, false);
  return {
    state: marked.state,
    actions: [
      { kind: 'count' },
      // The line an operator must see (and the alert's docs quote): at error.
      log('error', { ...seen, why, wentBackAt: at, windowEndsAt: endsAt }, `the ledger went back (${why}): until ${new Date(endsAt).toISOString()} every GUID it does not know is inquired about before its first send`),
      ...marked.actions,
    ],
  };
}

/** The mark for the state at `at`: the window's wall-clock end first moved up to where the monotonic clock holds it. */
function markAt(settings: GuardSettings, state: GuardState, at: number, mono: number, stopped: boolean): Decision {
  const held = extendToHeld(state, at, mono);
  const { known, window } = held;
  const server = known.canChange ? { server: known.server, relay: settings.relay, ...(stopped ? { stopped } : {}) } : {};
  return { state: held, actions: [{ kind: 'writeMark', mark: { position: known.position, at, ...server, ...(window === null ? {} : { window }) } }] };
}

function extendToHeld(state: GuardState, at: number, mono: number): GuardState {
  const left = state.heldUntil - mono;
  const { window } = state;
  return window !== null && left > 0 && at + left > window.endsAt ? { ...state, window: { ...window, endsAt: Math.ceil(at + left) } } : state;
}

const holdUntil = (settings: GuardSettings, mono: number, ms: number): number => mono + Math.max(0, Math.min(ms, settings.windowMs));

/** Whether a first claim waits for a check: after a failed ledger call, a connection opened or lost, or checks that stopped succeeding. */
export function checkBeforeClaim(settings: GuardSettings, state: GuardState, connections: number, mono: number): boolean {
  return state.suspect || connections !== state.connectionsChecked || mono - state.checkedAt > 2 * settings.checkEveryMs;
}

/** What the guard had seen when it let a claim through: goings back, and the store's connection events at that check. */
export interface ClaimGate {
  readonly wentBack: number;
  readonly connections: number;
}

/**
 * Whether a claim let through at `gate` may be sent: `send`; `withheld` (the ledger went back since: the claim may
 * stand on a server that forgot earlier claims); `checkFirst` (a connection opened or lost, or a call failed, since
 * the check the gate relied on: a check that starts after the claim decides, `sameSince`).
 */
export function claimStands(settings: GuardSettings, state: GuardState, gate: ClaimGate, connections: number): 'send' | 'withheld' | 'checkFirst' {
  if (settings.windowMs <= 0) return 'send';
  // No connection opened or lost since the check the gate relied on: the claim went to the server checked.
  if (!state.known.canChange || (connections === gate.connections && !state.suspect)) return sameSince(state, gate) ? 'send' : 'withheld';
  return 'checkFirst';
}

/** No going back seen since the gate. */
export const sameSince = (state: GuardState, gate: ClaimGate): boolean => state.wentBack === gate.wentBack;

/** How `/v1/stats` and the console show the guard (`breaks` and `lastBreak`: the goings back, as the API names them). */
export type ContinuityView =
  | { readonly state: 'off'; readonly breaks: number; readonly lastBreak: GoingBack | null }
  | { readonly state: 'watching'; readonly breaks: number; readonly lastBreak: GoingBack | null }
  | { readonly state: 'window'; readonly breaks: number; readonly wentBackAt: number; readonly endsAt: number; readonly lastBreak: GoingBack | null };

export function viewOf(settings: GuardSettings, state: GuardState): ContinuityView {
  const shown = { breaks: state.wentBack, lastBreak: state.lastWentBack };
  if (settings.windowMs <= 0) return { state: 'off', ...shown };
  const { window } = state;
  return window === null ? { state: 'watching', ...shown } : { state: 'window', breaks: shown.breaks, wentBackAt: window.wentBackAt, endsAt: window.endsAt, lastBreak: shown.lastBreak };
}

const log = (level: 'warn' | 'error', line: Record<string, unknown>, message: string): Action => ({ kind: 'log', level, line, message });
const warn = (line: Record<string, unknown>, message: string): Action => log('warn', line, message);
const error = (line: Record<string, unknown>, message: string): Action => log('error', line, message);
