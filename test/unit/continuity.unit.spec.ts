/**
 * The continuity guard's judgement (src/events/continuity.ts, CONTRACT.md §9) as a decider: given what the guard
 * saw as it started and since, when it observes this, then this state and these actions (count, log, mark). The
 * shell that reads a real ledger: test/int/continuityGuard.int.spec.ts; failovers and restores:
 * test/e2e/continuity*.e2e.spec.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  begin, checkBeforeClaim, checkStep, claimStands, decide, ownWritesLost, viewOf,
  type Beginning, type Decision, type GuardSettings, type GuardState, type Observation,
} from '../../src/events/continuity.js';
import { firstSendAfterInquiry } from '../../src/events/decide.js';
import type { ContinuityMark, LedgerStanding } from '../../src/events/store.js';

const HOUR = 3_600_000;
const T0 = 1_700_000_000_000; // the ledger's clock at start
const M0 = 5_000; // the monotonic clock at start
const SETTINGS: GuardSettings = { windowMs: HOUR, checkEveryMs: 1000, ringEvery: 10, relay: 'relay-1' };

const standing = (o: Partial<LedgerStanding> = {}): LedgerStanding => ({
  server: 'pg:7/timeline 1', instance: 'db1:5432@1', position: 40, canChange: true, seen: {}, ...o,
});

/** Given the start (and observations after it), when one more observation, then the decision. */
function given(start: Partial<Beginning> = {}, ...since: Observation[]) {
  return givenWith(SETTINGS, start, ...since);
}

function givenWith(settings: GuardSettings, start: Partial<Beginning>, ...since: Observation[]) {
  const begun = begin(settings, { standing: standing(), mark: null, at: T0, mono: M0, checkedAt: M0, connections: 0, serverJudged: null, ...start });
  const state = since.reduce<GuardState>((s, o) => decide(settings, s, o).state, begun.state);
  return {
    begun,
    state,
    when: (o: Observation): Decision => decide(settings, state, o),
  };
}

const counted = (d: Decision): number => d.actions.filter((a) => a.kind === 'count').length;
const lines = (d: Decision, level: 'warn' | 'error'): string[] => d.actions.flatMap((a) => (a.kind === 'log' && a.level === level ? [a.message] : []));
const marks = (d: Decision): ContinuityMark[] => d.actions.flatMap((a) => (a.kind === 'writeMark' ? [a.mark] : []));

/** A check that read `now` against what the guard knew, and found `found`. */
const checked = (before: LedgerStanding, now: LedgerStanding, found: Extract<Observation, { kind: 'checked' }>['found'], mono = M0 + 2000): Observation => ({ kind: 'checked', before, standing: now, found, mono });

/** A going back seen by a check at T0 + 1 s: the position fell to 30 (the check took that standing, then judged it). */
const fallen = standing({ position: 30 });
const tookFallen: Observation = { kind: 'taken', standing: fallen };
const fell: Observation = checked(standing(), fallen, { kind: 'fell', at: T0 + 1000 });

describe('at start: the first standing against the mark', () => {
  it('no mark and nothing to judge (a new ledger): no window, the first mark written', () => {
    const { begun } = given();
    expect([counted(begun), begun.state.window]).toEqual([0, null]);
    expect(marks(begun)).toEqual([{ position: 40, at: T0, server: 'pg:7/timeline 1', relay: 'relay-1' }]);
  });

  it('no mark for a ledger with history (the store judged the standing unknown): the ledger went back, the window opens', () => {
    const unknown: ContinuityMark = { position: 0, at: 0, judged: { verdict: 'unknown', why: 'there is no continuity mark for this ledger in /m' } };
    const { begun } = given({ mark: unknown, standing: standing({ canChange: false }) });
    expect(counted(begun)).toBe(1);
    expect(begun.state.window).toMatchObject({ wentBackAt: T0, endsAt: T0 + HOUR, why: 'there is no continuity mark for this ledger in /m' });
    expect(lines(begun, 'error')).toEqual([expect.stringMatching(/^the ledger went back \(there is no continuity mark .*\): until /)]);
    // The going back's mark, then the first standing's: both carry the window, neither a server (a file).
    expect(marks(begun).map((m) => [m.window?.endsAt, m.server])).toEqual([[T0 + HOUR, undefined], [T0 + HOUR, undefined]]);
  });

  it('a mark that agrees with the ledger (the same position, the same server): no window, nothing counted', () => {
    const { begun } = given({ mark: { position: 40, at: T0 - 5000, server: 'pg:7/timeline 1' } });
    expect([counted(begun), begun.state.window, lines(begun, 'error'), lines(begun, 'warn')]).toEqual([0, null, [], []]);
  });

  it('a ledger behind its mark (an older copy put back): the ledger went back', () => {
    const { begun } = given({ mark: { position: 45, at: T0 - 5000 } });
    expect(counted(begun)).toBe(1);
    expect(begun.state.lastWentBack).toEqual({ at: T0, why: 'the ledger is behind the position serve last recorded: restored from an older copy?' });
  });

  it('a window the mark says is still open is continued, not counted again, and held on the monotonic clock for what is left', () => {
    const mark: ContinuityMark = { position: 40, at: T0 - 1000, window: { wentBackAt: T0 - 600_000, endsAt: T0 + 60_000, why: 'x' } };
    const { begun } = given({ mark });
    expect(counted(begun)).toBe(0);
    expect(begun.state).toMatchObject({ window: { wentBackAt: T0 - 600_000, endsAt: T0 + 60_000 }, heldUntil: M0 + 60_000 });
    expect(lines(begun, 'warn')).toEqual([expect.stringMatching(/^continuity window still open from before the restart/)]);
    // An ended one is not continued.
    expect(given({ mark: { ...mark, window: { wentBackAt: T0 - 600_000, endsAt: T0 } } }).begun.state.window).toBeNull();
  });

  it('another server than the relays recorded: a lossless one the store vouches for opens no window; any other does', () => {
    const mark: ContinuityMark = { position: 40, at: T0 - 1000, server: 'pg:7/timeline 1' };
    const now = standing({ server: 'pg:7/timeline 2' });
    const trusted = given({ mark, standing: now, serverJudged: { trusted: true, why: 'synchronous' } }).begun;
    expect([counted(trusted), trusted.state.window]).toEqual([0, null]);
    expect(lines(trusted, 'warn')).toEqual(['another server or timeline answers than the one the relays last recorded in the ledger; trusted: synchronous']);
    const lossy = given({ mark, standing: now, serverJudged: { trusted: false, why: 'relay r2 did not vouch' } }).begun;
    expect(counted(lossy)).toBe(1);
    expect(lossy.state.window?.why).toMatch(/not shown lossless \(relay r2 did not vouch\)/);
  });
});

describe('a check: the standing read against the one known', () => {
  it('which reads a check needs: another server, the position fallen, the recent events (restart, a failed call, every tenth check), or none', () => {
    const { state } = given({}, { kind: 'standingRead', mono: M0 + 1000, connections: 0 });
    expect(checkStep(SETTINGS, state, standing({ server: 'pg:7/timeline 2' }), false)).toBe('server');
    expect(checkStep(SETTINGS, state, standing({ position: 39 }), false)).toBe('fell');
    // A file cannot change under the process (the file watch guards it): its position falling is not judged here.
    expect(checkStep(SETTINGS, { ...state, known: standing({ canChange: false }) }, standing({ position: 39, canChange: false }), false)).toBe('same');
    expect(checkStep(SETTINGS, state, standing({ instance: 'db1:5432@2' }), false)).toBe('recent');
    expect(checkStep(SETTINGS, state, standing(), true)).toBe('recent');
    expect(checkStep(SETTINGS, { ...state, checks: 10 }, standing(), false)).toBe('recent');
    expect(checkStep(SETTINGS, state, standing({ position: 41 }), false)).toBe('same');
  });

  it('the position fell (a base backup restored on the same timeline): the ledger went back, the window opens and is recorded', () => {
    const d = given({}, tookFallen).when(fell);
    expect(counted(d)).toBe(1);
    expect(d.state.window).toMatchObject({ wentBackAt: T0 + 1000, endsAt: T0 + 1000 + HOUR, why: "the log's highest position fell from 40 to 30: the ledger was restored or replaced by an older copy" });
    expect(marks(d)).toHaveLength(1);
    expect(marks(d)[0]!.window?.wentBackAt).toBe(T0 + 1000);
    expect(viewOf(SETTINGS, d.state)).toMatchObject({ state: 'window', breaks: 1, endsAt: T0 + 1000 + HOUR });
  });

  it('a lossless failover (the store shows every relay\'s writes reached the new timeline): no window, nothing counted, one warning', () => {
    const d = given().when(checked(standing(), standing({ server: 'pg:7/timeline 2' }), { kind: 'server', at: T0 + 1000, judged: { trusted: true, why: 'timeline 1 → 2, synchronous' } }));
    expect([counted(d), d.state.window, marks(d)]).toEqual([0, null, []]);
    expect(lines(d, 'warn')).toEqual(['another server or timeline answers under the connection; no going back: timeline 1 → 2, synchronous']);
  });

  it('another timeline not shown lossless: the ledger went back', () => {
    const d = given().when(checked(standing(), standing({ server: 'pg:7/timeline 2' }), { kind: 'server', at: T0 + 1000, judged: { trusted: false, why: 'no relay recorded synchronous replication' } }));
    expect(counted(d)).toBe(1);
    expect(d.state.window?.why).toBe('another server or timeline answers under the connection, not shown lossless: no relay recorded synchronous replication');
  });

  it("under another server, this relay's own writes: which fact is not shown, for the store's judgement and its log line", () => {
    const old = standing({ position: 282 });
    const promoted = (position: number) => standing({ server: 'pg:7/timeline 2', position });
    expect(ownWritesLost([], 5, old, promoted(300))).toBeNull();
    expect(ownWritesLost([{ guid: 'b', seq: 1 }], 5, old, promoted(300))).toBe('1 of its 5 recently acknowledged events are missing');
    // Every recent event there, but the log is behind what this relay saw committed: writes were lost, whoever's.
    expect(ownWritesLost([], 5, old, promoted(78))).toBe('the log reaches position 78, below the 282 it saw committed on the old server');
    expect(ownWritesLost(null, 5, old, promoted(300))).toBe('its recently acknowledged events could not be looked up');
  });

  it('a restart with every recent event there is no going back (said once); one with an event missing is', () => {
    const restarted = standing({ instance: 'db1:5432@2' });
    const kept = given().when(checked(standing(), restarted, { kind: 'recent', missing: [], recent: 3, at: null }));
    expect([counted(kept), kept.state.window]).toEqual([0, null]);
    expect(lines(kept, 'warn')).toEqual([expect.stringMatching(/restarted or another host answers; every recently acknowledged event is there: no going back$/)]);
    const lost = given().when(checked(standing(), restarted, { kind: 'recent', missing: [{ guid: 'b', seq: 1 }], recent: 2, at: T0 + 1000 }));
    expect(counted(lost)).toBe(1);
    expect(lost.state.lastWentBack?.why).toBe("1 of this relay's 2 most recently acknowledged events are missing");
  });

  it('a read the check needed failed: nothing judged, the next claim waits for a check; a check that succeeds clears that', () => {
    const failed = given().when(checked(standing(), standing({ server: 'pg:7/timeline 2' }), { kind: 'unread' }));
    expect([counted(failed), failed.state.suspect, failed.state.window]).toEqual([0, true, null]);
    const after = given({}, { kind: 'callFailed' }).when(checked(standing(), standing(), { kind: 'same' }));
    expect(after.state.suspect).toBe(false);
  });
});

describe('the window: its end on the wall clock and on the monotonic clock', () => {
  // Opened at T0 + 1 s, monotonic M0 + 2 s: held until M0 + 2 s + 1 h.
  it('open while both clocks are before its end', () => {
    const d = given({}, tookFallen, fell).when({ kind: 'clock', at: T0 + 1000 + HOUR - 1, mono: M0 + 2000 + HOUR - 1 });
    expect(d.state.window).not.toBeNull();
    expect(d.actions).toEqual([]);
  });

  it('a wall clock stepped forward past the end does not close it: the end moves up to what the monotonic clock holds', () => {
    const stepped = T0 + 1000 + HOUR + 600_000; // ten minutes past the end by the wall clock
    const d = given({}, tookFallen, fell).when({ kind: 'clock', at: stepped, mono: M0 + 2000 + 60_000 }); // one minute in, monotonic
    expect(d.state.window?.endsAt).toBe(stepped + HOUR - 60_000);
    expect(d.actions).toEqual([]);
  });

  it('ends once both clocks are past it: said at warn, the mark written without it', () => {
    const d = given({}, tookFallen, fell).when({ kind: 'clock', at: T0 + 1000 + HOUR, mono: M0 + 2000 + HOUR });
    expect(d.state.window).toBeNull();
    expect(lines(d, 'warn')).toEqual(['continuity window ended: GUIDs the ledger does not know are sent as usual again']);
    expect(marks(d)).toEqual([{ position: 30, at: T0 + 1000 + HOUR, server: 'pg:7/timeline 1', relay: 'relay-1' }]);
    expect(viewOf(SETTINGS, d.state)).toEqual({ state: 'watching', breaks: 1, lastBreak: { at: T0 + 1000, why: expect.any(String) } });
  });

  it('a second going back inside it starts it again, never ends it earlier', () => {
    const later = given({}, tookFallen, fell).when({ kind: 'witnessed', at: T0 + 60_000, mono: M0 + 61_000, why: 'journal', seen: {} });
    expect(later.state.window).toMatchObject({ wentBackAt: T0 + 60_000, endsAt: T0 + 60_000 + HOUR });
    expect(later.state.wentBack).toBe(2);
  });

  it('--continuity-window 0: the going back is counted and logged at error, no window, nothing held back', () => {
    const off = { ...SETTINGS, windowMs: 0 };
    const d = givenWith(off, {}, tookFallen).when(fell);
    expect([counted(d), d.state.window, marks(d)]).toEqual([1, null, []]);
    expect(lines(d, 'error')).toEqual([expect.stringMatching(/--continuity-window is 0: trusting the database/)]);
    expect(viewOf(off, d.state)).toMatchObject({ state: 'off', breaks: 1 });
    expect(claimStands(off, d.state, { wentBack: 0, connections: 0 }, 5)).toBe('send');
  });
});

describe('may a GUID the ledger does not know be claimed and sent', () => {
  it('a first claim waits for a check after a failed call, a connection opened or lost, or checks that stopped', () => {
    const { state } = given();
    expect(checkBeforeClaim(SETTINGS, state, 0, M0 + 1000)).toBe(false);
    expect(checkBeforeClaim(SETTINGS, { ...state, suspect: true }, 0, M0 + 1000)).toBe(true);
    expect(checkBeforeClaim(SETTINGS, state, 1, M0 + 1000)).toBe(true);
    expect(checkBeforeClaim(SETTINGS, state, 0, M0 + 2001)).toBe(true);
  });

  it('inside the window, inquire first: processed → DONE, nothing sent; absent before --min-age after the going back → refused; after it → sent', () => {
    const { state } = given({}, tookFallen, fell);
    const wentBackAt = state.window!.wentBackAt;
    const minAgeMs = 60_000;
    expect(firstSendAfterInquiry({ wentBackAt, at: wentBackAt + 1000, answer: { kind: 'processed', code: '0000', response: '{}' } }, minAgeMs)).toBe('processed');
    expect(firstSendAfterInquiry({ wentBackAt, at: wentBackAt + 1000, answer: { kind: 'absent' } }, minAgeMs)).toBe('too-young');
    expect(firstSendAfterInquiry({ wentBackAt, at: wentBackAt + minAgeMs, answer: { kind: 'absent' } }, minAgeMs)).toBe('send');
    expect(firstSendAfterInquiry({ wentBackAt, at: wentBackAt + minAgeMs, answer: { kind: 'unknown' } }, minAgeMs)).toBe('inquiry-unclear');
  });

  it('after the claim: sent when nothing went back since the gate; withheld when it did; checked first when a connection moved', () => {
    const { state } = given();
    const gate = { wentBack: state.wentBack, connections: state.connectionsChecked };
    expect(claimStands(SETTINGS, state, gate, 0)).toBe('send');
    expect(claimStands(SETTINGS, decide(SETTINGS, state, fell).state, gate, 0)).toBe('withheld');
    expect(claimStands(SETTINGS, state, gate, 1)).toBe('checkFirst');
    expect(claimStands(SETTINGS, { ...state, suspect: true }, gate, 0)).toBe('checkFirst');
    // A file cannot change server under the process: no check needed.
    expect(claimStands(SETTINGS, { ...state, known: standing({ canChange: false }) }, gate, 1)).toBe('send');
  });
});

describe('the mark', () => {
  it('a clean stop records the relay as stopped; a file records no server', () => {
    const stop: Observation = { kind: 'markDue', at: T0 + 5000, mono: M0 + 5000, stopped: true };
    expect(marks(given().when(stop))).toEqual([{ position: 40, at: T0 + 5000, server: 'pg:7/timeline 1', relay: 'relay-1', stopped: true }]);
    expect(marks(given({ standing: standing({ canChange: false }) }).when(stop))).toEqual([{ position: 40, at: T0 + 5000 }]);
  });

  it('the position last written is what a check compares with', () => {
    expect(given().when({ kind: 'markWritten', position: 40 }).state.markedPosition).toBe(40);
  });
});
