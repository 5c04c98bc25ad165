/**
 * The contract (CONTRACT.md §2–§4) as a test oracle, written independently of src/: the transfers a schedule
 * sends, their fingerprints, the legal transitions of a GUID's event stream, and which reply the state table
 * allows for the states a GUID passed through while a request was being answered.
 *
 * Nothing here imports the code under test, so a bug in `decide`, `evolve`, `fingerprintOf` or `replies.ts`
 * cannot hide itself by being used as its own oracle.
 */
import { createHash } from 'node:crypto';
import type Database from 'better-sqlite3';

export type Status = 'RECEIVED' | 'SENT' | 'DONE' | 'UNKNOWN' | 'FAILED' | 'PURGED';

/** What the account system will answer a GUID's transfer with when it is healthy. */
export type Kind = 'ok' | 'insufficient' | 'unknown-account';
/**
 * How a channel phrases a send: `base`; `cosmetic` (keys reordered, spaces, an extra field: same fingerprint);
 * `header` (GUID only in the Idempotency-Key header: same fingerprint); `changed` (another amount: E904).
 */
export type Variant = 'base' | 'cosmetic' | 'header' | 'changed';
export const VARIANTS: readonly Variant[] = ['base', 'cosmetic', 'header', 'changed'];

/** Every account holds 1,000,000,000,000 minor units in the simulator; more than that is B201. */
const HUGE = 2_000_000_000_000;

export interface Fields {
  readonly guid: string;
  readonly from: string;
  readonly to: string;
  readonly amount: number;
  readonly currency: string;
}

export function fieldsOf(guid: string, kind: Kind, variant: Variant, index: number): Fields {
  const base = kind === 'insufficient' ? HUGE + index : 100 + index;
  return {
    guid,
    from: kind === 'unknown-account' ? `X-${index}` : `ACC-${1000 + index}`,
    to: `ACC-${2000 + index}`,
    amount: variant === 'changed' ? base + 1 : base,
    currency: 'CNY',
  };
}

/** The contract's fingerprint: SHA-256 over the canonical JSON (sorted keys, no spaces) of the five fields. */
export function contractFingerprint(f: Fields): string {
  const sorted = Object.fromEntries(Object.entries({ guid: f.guid, from: f.from, to: f.to, amount: f.amount, currency: f.currency }).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return createHash('sha256').update(JSON.stringify(sorted)).digest('hex');
}

export interface ChannelRequest {
  readonly body: string;
  readonly headers: Record<string, string>;
  readonly fingerprint: string;
}

export function channelRequest(guid: string, kind: Kind, variant: Variant, index: number): ChannelRequest {
  const f = fieldsOf(guid, kind, variant, index);
  const fingerprint = contractFingerprint(f);
  switch (variant) {
    case 'base':
    case 'changed':
      return { body: JSON.stringify({ guid: f.guid, from: f.from, to: f.to, amount: f.amount, currency: f.currency }), headers: {}, fingerprint };
    case 'cosmetic':
      return { body: `{ "memo": {"note": "resent by channel"}, "currency": "${f.currency}", "amount": ${f.amount}, "to": "${f.to}", "from": "${f.from}", "guid": "${f.guid}" }`, headers: {}, fingerprint };
    case 'header':
      return { body: JSON.stringify({ from: f.from, to: f.to, amount: f.amount, currency: f.currency }), headers: { 'idempotency-key': guid }, fingerprint };
  }
}

/** The definite code the account system gives a kind when nothing is injected (E500 may come from faults). */
export function healthyCode(kind: Kind): string {
  return kind === 'ok' ? '0000' : kind === 'insufficient' ? 'B201' : 'B202';
}

// ---------------------------------------------------------------------------------------------------------
// Event streams

export interface LogEvent {
  readonly seq: number;
  readonly type: string;
  readonly at: number;
  readonly data: Record<string, unknown>;
}

/** The part of a GUID's state the state table talks about. */
export interface MState {
  readonly status: Status;
  readonly attempts: number;
  readonly code: string | null;
  readonly response: string | null;
  readonly fingerprint: string;
  readonly lastSeq: number;
  /** FAILED through an inquiry that said absent (§7): the last attempt may have arrived; a resend inquires first. */
  readonly byInquiry: boolean;
}

const DEFINITE = /^(0000|B2\d\d|E500)$/;
export const isDefinite = (code: string): boolean => DEFINITE.test(code);

/**
 * One event on a state, by the contract's table of transitions (§4). Returns the next state, or the reason
 * the transition is not one the contract allows.
 */
export function applyEvent(prev: MState | null, e: LogEvent): { next: MState } | { illegal: string } {
  const bad = (why: string) => ({ illegal: `seq ${e.seq} ${e.type} ${JSON.stringify(e.data)} on ${prev === null ? '∅' : `${prev.status}/attempts=${prev.attempts}`}: ${why}` });
  const num = (k: string): number => (typeof e.data[k] === 'number' ? (e.data[k] as number) : NaN);
  const str = (k: string): string | null => (typeof e.data[k] === 'string' ? (e.data[k] as string) : null);
  if (e.type === 'Claimed') {
    if (prev !== null || e.seq !== 0) return bad('Claimed must open the stream at seq 0');
    const fp = str('fingerprint');
    if (fp === null) return bad('no fingerprint');
    return { next: { status: 'RECEIVED', attempts: 0, code: null, response: null, fingerprint: fp, lastSeq: 0, byInquiry: false } };
  }
  if (prev === null) return bad('stream does not start with Claimed');
  if (e.seq !== prev.lastSeq + 1) return bad(`seq gap (last ${prev.lastSeq})`);
  const at = { ...prev, lastSeq: e.seq, byInquiry: false };
  switch (e.type) {
    case 'Sent':
      if (prev.status !== 'RECEIVED' && prev.status !== 'FAILED') return bad('Sent only from RECEIVED or FAILED (never resend UNKNOWN, SENT or DONE)');
      if (num('attempt') !== prev.attempts + 1) return bad(`attempt must be ${prev.attempts + 1}`);
      return { next: { ...at, status: 'SENT', attempts: prev.attempts + 1, code: null } };
    case 'Answered': {
      const code = str('code');
      if (prev.status !== 'SENT') return bad('Answered only from SENT');
      if (num('attempt') !== prev.attempts) return bad('Answered for another attempt');
      if (code === null || !isDefinite(code)) return bad('Answered with a code that is not definite');
      return { next: { ...at, status: 'DONE', code, response: str('response') } };
    }
    case 'TimedOut':
      if (prev.status !== 'SENT') return bad('TimedOut only from SENT');
      if (num('attempt') !== prev.attempts) return bad('TimedOut for another attempt');
      return { next: { ...at, status: 'UNKNOWN', code: 'E901' } };
    case 'ConnectFailed': {
      const reason = str('reason');
      if (prev.status === 'RECEIVED') {
        if (reason !== 'never-sent') return bad('a RECEIVED row can only fail as never-sent');
      } else if (prev.status === 'SENT') {
        if (reason !== 'refused' && reason !== 'connect-timeout') return bad('a SENT row fails only when the connection could not be made');
        if (num('attempt') !== prev.attempts) return bad('ConnectFailed for another attempt');
      } else return bad('ConnectFailed only from RECEIVED or SENT');
      // A SENT row an older attempt's answer marked (StaleAnswer) keeps the mark: that attempt reached the account system.
      return { next: { ...at, status: 'FAILED', code: 'E902', byInquiry: prev.byInquiry } };
    }
    case 'Resolved': {
      const source = str('source');
      const outcome = str('outcome');
      const code = str('code');
      // §7: the inquiry before a resend may also find a row FAILED by an earlier inquiry processed.
      const inquiryBeforeResend = prev.status === 'FAILED' && prev.byInquiry && outcome === 'processed';
      if (source === 'inquiry' && prev.status !== 'UNKNOWN' && !inquiryBeforeResend) return bad('an inquiry settles only UNKNOWN rows (or a row FAILED by an inquiry, found processed before a resend)');
      if (source === 'late-answer' && prev.status !== 'UNKNOWN' && prev.status !== 'FAILED') return bad('a late answer lands only on UNKNOWN or FAILED');
      if (source !== 'inquiry' && source !== 'late-answer') return bad('unknown source');
      if (outcome === 'processed') {
        if (code === null || !isDefinite(code)) return bad('processed without a definite code');
        return { next: { ...at, status: 'DONE', code, response: str('response') } };
      }
      if (outcome === 'absent' && source === 'inquiry') return { next: { ...at, status: 'FAILED', code: 'E902', byInquiry: true } };
      return bad('unknown outcome');
    }
    case 'Purged':
      if (prev.status !== 'DONE') return bad('Purged only from DONE');
      return { next: { ...at, status: 'PURGED', response: null } };
    case 'StaleAnswer': {
      // An answer the row has moved past: an older attempt's (any state), or this attempt's once an inquiry or purge
      // settled the row. Kept, never the row's outcome: nothing changes but the seq; a FAILED row may now have arrived.
      const attempt = num('attempt');
      const settled = prev.status === 'DONE' || prev.status === 'PURGED';
      if (num('currentAttempt') !== prev.attempts) return bad('currentAttempt must be the attempt the row is at');
      if (!(attempt >= 1 && (attempt < prev.attempts || (attempt === prev.attempts && settled)))) return bad('only for an older attempt, or for this one once the row is settled');
      const code = str('code');
      if (code === null || !isDefinite(code)) return bad('StaleAnswer with a code that is not definite');
      if (prev.status === 'PURGED' && e.data['response'] !== null) return bad('a tombstone keeps no answer body');
      return { next: { ...prev, lastSeq: e.seq, byInquiry: prev.byInquiry || prev.status === 'FAILED' || prev.status === 'SENT' } };
    }
    default:
      return bad('unknown event type');
  }
}

/** Folds a whole stream, collecting every illegal transition. */
export function foldStream(events: readonly LogEvent[]): { state: MState | null; states: MState[]; illegal: string[] } {
  let state: MState | null = null;
  const states: MState[] = [];
  const illegal: string[] = [];
  for (const e of events) {
    const r = applyEvent(state, e);
    if ('illegal' in r) {
      illegal.push(r.illegal);
      return { state, states, illegal };
    }
    state = r.next;
    states.push(state);
  }
  return { state, states, illegal };
}

// ---------------------------------------------------------------------------------------------------------
// Reading the ledger file directly (any connection, any process)

interface RawRow {
  guid: string;
  status: Status;
  code: string | null;
  response: string | null;
  fingerprint: string;
  attempts: number;
  last_seq: number;
  sent_at: number | null;
  failed_by_inquiry: number;
  updated_at: number;
}

export interface LedgerReader {
  row(guid: string): (MState & { sentAt: number | null; updatedAt: number }) | null;
  rows(): Array<MState & { guid: string; sentAt: number | null; updatedAt: number }>;
  events(guid: string, afterSeq?: number): LogEvent[];
  allEvents(): Map<string, LogEvent[]>;
  /** The ledger rows and the whole log as of one instant (one read transaction: other processes write meanwhile). */
  snapshot(): { rows: Array<MState & { guid: string; sentAt: number | null; updatedAt: number }>; events: Map<string, LogEvent[]> };
}

const toState = (r: RawRow) => ({
  status: r.status,
  attempts: r.attempts,
  code: r.code,
  response: r.response,
  fingerprint: r.fingerprint,
  lastSeq: r.last_seq,
  byInquiry: r.failed_by_inquiry === 1,
  sentAt: r.sent_at,
  updatedAt: r.updated_at,
});

/** Synchronous reads of the `ledger` and `events` tables through a better-sqlite3 connection. */
export function ledgerReader(db: Database.Database): LedgerReader {
  let self: LedgerReader;
  const one = db.prepare('SELECT * FROM ledger WHERE guid = ?');
  const all = db.prepare('SELECT * FROM ledger ORDER BY guid');
  const stream = db.prepare('SELECT seq, type, at, data FROM events WHERE guid = ? AND seq > ? ORDER BY seq');
  const everything = db.prepare('SELECT guid, seq, type, at, data FROM events ORDER BY guid, seq');
  const parse = (r: { seq: number; type: string; at: number; data: string }): LogEvent => ({ seq: r.seq, type: r.type, at: r.at, data: JSON.parse(r.data) as Record<string, unknown> });
  self = {
    row(guid) {
      const r = one.get(guid) as RawRow | undefined;
      return r === undefined ? null : toState(r);
    },
    rows() {
      return (all.all() as RawRow[]).map((r) => ({ guid: r.guid, ...toState(r) }));
    },
    events(guid, afterSeq = -1) {
      return (stream.all(guid, afterSeq) as Array<{ seq: number; type: string; at: number; data: string }>).map(parse);
    },
    allEvents() {
      const m = new Map<string, LogEvent[]>();
      for (const r of everything.all() as Array<{ guid: string; seq: number; type: string; at: number; data: string }>) {
        const list = m.get(r.guid) ?? [];
        list.push(parse(r));
        m.set(r.guid, list);
      }
      return m;
    },
    snapshot() {
      return db.transaction(() => ({ rows: self.rows(), events: self.allEvents() }))();
    },
  };
  return self;
}

/**
 * The states a GUID passed through between a read before a request and a read after its reply: the state
 * before (if any), then one per event appended meanwhile, folded from the log.
 */
export function statesBetween(reader: LedgerReader, guid: string, before: MState | null): { states: MState[]; illegal: string[] } {
  return statesAfter(before, reader.events(guid, before?.lastSeq ?? -1));
}

/** The state `before`, then one per event of `events` (those appended after it), folded. */
export function statesAfter(before: MState | null, events: readonly LogEvent[]): { states: MState[]; illegal: string[] } {
  const states: MState[] = before === null ? [] : [before];
  let s = before;
  for (const e of events) {
    const r = applyEvent(s, e);
    if ('illegal' in r) return { states, illegal: [r.illegal] };
    s = r.next;
    states.push(s);
  }
  return { states, illegal: [] };
}

// ---------------------------------------------------------------------------------------------------------
// The state table (§2)

export interface ObservedReply {
  readonly status: number;
  readonly body: string;
  readonly replayed: boolean;
}

const HTTP_OF: Record<string, number> = { E400: 400, E404: 404, E503: 503, E901: 504, E902: 503, E903: 409, E904: 422, E905: 410 };

export function replyCode(r: ObservedReply): { code: string; json: Record<string, unknown> | null } {
  try {
    const json = JSON.parse(r.body) as Record<string, unknown>;
    return { code: typeof json['code'] === 'string' ? json['code'] : '(none)', json };
  } catch {
    return { code: '(not JSON)', json: null };
  }
}

export interface ReplyContext {
  /** The contract fingerprint of the request sent. */
  readonly requestFingerprint: string;
  /** The row's fingerprint after the reply (null: no row). */
  readonly rowFingerprint: string | null;
  /** The states the row passed through while the request was answered (see statesBetween). */
  readonly states: readonly MState[];
  /**
   * There was no row when the request was sent: the relay may have read it absent even when another request's
   * claim made the row before the reply (then `states` begins with that claim's RECEIVED).
   */
  readonly absentBefore: boolean;
  readonly maxAttempts: number;
  /** The first definite answer any channel got for this GUID, if one did (checked against a purged row). */
  readonly firstDefinite: string | undefined;
  /**
   * The relay's ledger was out of its reach while it answered (the relay frozen, its acknowledgement held, or the
   * other relay frozen holding a lock it needed): a claim may then miss its send window and be left SENT uncalled
   * (E901), and E503 (nothing called) is a right answer. Unset: the ledger was healthy, and neither is.
   */
  readonly ledgerStalled?: boolean;
  /**
   * The claim may have been acknowledged past its send window without the ledger failing the relay (in process: a
   * freeze or held acknowledgement the relay waits out whole, or a tick of its clock): E901 for a row left SENT
   * uncalled is right, E503 still is not.
   */
  readonly claimDelayed?: boolean;
}

/**
 * Is this reply one the contract's state table prescribes for the states the row was in while the request
 * was answered? Returns the violations (empty: fine). A request that claims the row goes through SENT and the
 * outcome of its own call, so the union over the states covers "right after an unknown outcome" too.
 */
/** The breaker's E902 (§7): nothing was claimed or stored for it. */
export function breakerRefusal(json: Record<string, unknown>): boolean {
  return typeof json['message'] === 'string' && json['message'].includes('breaker open');
}

export function judgeReply(r: ObservedReply, ctx: ReplyContext): string[] {
  const v: string[] = [];
  const { code, json } = replyCode(r);
  const some = (p: (s: MState) => boolean) => ctx.states.some(p);
  const seen = ctx.states.map((s) => `${s.status}#${s.lastSeq}`).join('→') || '∅';
  const say = (why: string) => v.push(`${code} (HTTP ${r.status}${r.replayed ? ', replayed' : ''}) ${why}; states ${seen}`);

  if (json === null) return [`reply is not JSON: ${r.body.slice(0, 80)}`];
  if (isDefinite(code)) {
    if (r.status !== 200) say('a definite answer must be HTTP 200');
  } else if (HTTP_OF[code] === undefined) {
    say('is not a contract code');
    return v;
  } else if (r.status !== HTTP_OF[code]) say(`must be HTTP ${HTTP_OF[code]}`);
  if (r.replayed && !isDefinite(code)) say('only a definite answer is replayed');

  if (code === 'E400' || code === 'E404') say('never for a valid request');
  if (code === 'E503' && ctx.ledgerStalled !== true) say('the ledger was healthy');

  const mismatch = ctx.rowFingerprint !== null && ctx.rowFingerprint !== ctx.requestFingerprint;
  if (mismatch && code !== 'E904') say('the GUID was claimed with another fingerprint: must be E904');
  if (code === 'E904' && !mismatch) say('E904 only for a fingerprint that differs from the claimed one');
  if (code === 'E904') return v;

  switch (code) {
    case 'E903':
      if (!some((s) => s.status === 'RECEIVED' || s.status === 'SENT')) say('E903 only while RECEIVED or SENT');
      break;
    case 'E901':
      // §7: a resend of a row FAILED by an inquiry is held (E901) while too young or while the inquiry cannot tell.
      // Issue #24: a claim acknowledged past the send window is not called, and the row stays SENT for the sweep.
      if (!some((s) => s.status === 'UNKNOWN' || (s.status === 'FAILED' && s.byInquiry)) && !(ctx.states.at(-1)?.status === 'SENT' && (ctx.ledgerStalled === true || ctx.claimDelayed === true))) {
        say('E901 only while UNKNOWN (or FAILED by an inquiry), right after an unknown outcome, or for a claim left SENT uncalled while the ledger stalled');
      }
      break;
    case 'E902':
      if (breakerRefusal(json)) {
        // §7: the breaker answers before the claim, so only a request that would have been sent gets it.
        if (!some((s) => s.status === 'FAILED' && s.attempts < ctx.maxAttempts) && !ctx.absentBefore) say('the breaker refuses only what would be sent (a new GUID, or FAILED under the cap)');
        break;
      }
      if (!some((s) => s.status === 'FAILED')) say('E902 only for FAILED');
      if (typeof json['message'] === 'string' && json['message'].includes('attempt cap') && !some((s) => s.status === 'FAILED' && s.attempts >= ctx.maxAttempts)) {
        say(`"attempt cap" only for FAILED with attempts >= ${ctx.maxAttempts}`);
      }
      break;
    case 'E905':
      if (!some((s) => s.status === 'PURGED' && s.code === json['originalCode'])) say(`E905 only for PURGED, with its code as originalCode (got ${String(json['originalCode'])})`);
      break;
    default:
      if (isDefinite(code)) {
        const matchesDone = some((s) => s.status === 'DONE' && s.response === r.body);
        // Purge takes the response out of the log: then the first answer given is the reference.
        const purgedSince = some((s) => s.status === 'PURGED') || some((s) => s.status === 'DONE' && s.response === null);
        if (!matchesDone && !(purgedSince && (ctx.firstDefinite === undefined || ctx.firstDefinite === r.body))) {
          say(`definite body is not the one the row holds (${ctx.states.filter((s) => s.status === 'DONE').map((s) => (s.response ?? 'null').slice(0, 60)).join(' | ') || 'never DONE'})`);
        }
        if (r.replayed && !some((s) => s.status === 'DONE')) say('replayed, but the row was never DONE');
      }
  }

  // Nothing moved while the request was answered: exactly the table's line for that state.
  if (ctx.states.length === 1) {
    const s = ctx.states[0]!;
    const want =
      s.status === 'DONE' ? `replayed ${s.code ?? ''}`
      : s.status === 'RECEIVED' || s.status === 'SENT' ? 'E903'
      : s.status === 'UNKNOWN' ? 'E901'
      : s.status === 'PURGED' ? 'E905'
      : s.attempts >= ctx.maxAttempts ? 'E902' : 'a new send';
    const got = r.replayed ? `replayed ${code}` : code;
    const held = s.status === 'FAILED' && s.byInquiry && got === 'E901';
    const refusedByBreaker = want === 'a new send' && code === 'E902' && breakerRefusal(json);
    if (got !== want && !held && !refusedByBreaker) say(`the row stayed ${s.status} (attempts ${s.attempts}, cap ${ctx.maxAttempts}): the table says ${want}`);
  }
  return v;
}
