import { REPLY_CODES, type ReplyCode } from '../contract/codes.js';
import type { Refusal } from '../events/decide.js';
import type { StoreError } from '../events/errors.js';
import type { LedgerState } from '../events/state.js';
import { heldReplyMessage, isHeld } from '../events/policy.js';
import type { ReplyRoute } from '../telemetry/metrics.js';

export interface Reply {
  readonly status: number;
  /** The exact bytes to send: the account system's answer for definite codes, our JSON otherwise. */
  readonly body: string;
  readonly code: string;
  readonly replayed: boolean;
  /** The `Retry-After` header, in seconds: on every "not sent" reply (E902, E503), and on an E901 whose inquiry waits for the budget. */
  readonly retryAfterS?: number;
}

/** The codes that say "not sent (so far)": each carries a `Retry-After`. */
const NOT_SENT_CODES: ReadonlySet<string> = new Set<ReplyCode>(['E902', 'E503']);

/** The longest `Retry-After` the relay gives for a row's pace: a minute. */
export const RETRY_AFTER_MAX_S = 60;

/**
 * When a channel should come back after a "not sent" reply for a row sent `attempts` times so far: 1 s, then
 * doubling with each attempt (1, 1, 2, 4, 8, 16 … s), at most a minute. Advice, not a gate: a resend of a FAILED row
 * under the cap that comes sooner is still sent at once (CONTRACT.md §2), but a client that honours it
 * (guidgate/client does) cannot spend a transfer's whole `--max-attempts` inside an outage of a few seconds.
 */
export function notSentRetryAfterS(attempts: number): number {
  return Math.min(RETRY_AFTER_MAX_S, 2 ** Math.max(0, attempts - 1));
}

/** When the open breaker lets a call through again (`remainingMs` from now), in whole seconds, at least 1. */
export function breakerRetryAfterS(remainingMs: number): number {
  return Math.max(1, Math.ceil(remainingMs / 1000));
}

/** The reply with its `Retry-After` set to `seconds`. */
/**
 * The replies to a channel that an operator must see (the transfer's log line is at warn, kept by `--log-level
 * warn`): sent with the outcome unknown, not sent, the ledger unavailable, a GUID reused for another request. Every
 * other reply is routine (info).
 */
export const needsAttention = (code: string): boolean => code === 'E901' || code === 'E902' || code === 'E503' || code === 'E904';

export const withRetryAfter = (reply: Reply, seconds: number): Reply => ({ ...reply, retryAfterS: seconds });

/** The channel API's routes (CONTRACT.md §2), as `METHOD pattern`; HEAD is answered by the GET route. */
const CHANNEL_ROUTES: ReadonlySet<string> = new Set(['POST /v1/transfers', 'GET /v1/transfers/:guid']);

/** The `route` label a reply is counted under: `pattern` is the matched route's (undefined: none matched). */
export function replyRoute(request: { readonly method: string; readonly routeOptions: { readonly url?: string | undefined } } | undefined): ReplyRoute {
  const pattern = request?.routeOptions.url;
  if (request === undefined || pattern === undefined) return 'unmatched';
  return CHANNEL_ROUTES.has(`${request.method === 'HEAD' ? 'GET' : request.method} ${pattern}`) ? 'channel' : 'operator';
}

/** Where an E503 is logged: a request's own logger (its line then carries the request id), or the app's. */
export const ledgerLog = (logger: { error(line: object, message: string): void }) => (line: Record<string, unknown>): void => logger.error(line, 'ledger unavailable');

/** An E503 for a store failure and its log line: the error's stable code and its cause, logged once per reply. */
export function ledgerUnavailableReply(guid: string | undefined, err: StoreError, log: ((line: Record<string, unknown>) => void) | undefined, attempts?: number): Reply {
  log?.({ ...(guid === undefined ? {} : { guid }), reply: 'E503', error: err.code, cause: err.message });
  return withRetryAfter(codeReply('E503', guid), notSentRetryAfterS(attempts ?? 0));
}

export function codeReply(code: ReplyCode, guid: string | undefined, extra: { message?: string; [k: string]: unknown } = {}): Reply {
  const { message, ...rest } = extra;
  const body = JSON.stringify({ ...(guid === undefined ? {} : { guid }), code, message: message ?? REPLY_CODES[code].message, ...rest });
  // Every "not sent" reply says when to come back; where the row or the breaker is known, the caller sets a better value.
  return { status: REPLY_CODES[code].http, body, code, replayed: false, ...(NOT_SENT_CODES.has(code) ? { retryAfterS: notSentRetryAfterS(0) } : {}) };
}

/** The account system's definite answer, byte for byte. */
export function definiteReply(code: string, body: string, replayed: boolean): Reply {
  return { status: 200, body, code, replayed };
}

/**
 * What a request for an existing GUID gets, by state (CONTRACT.md §2). Whether a FAILED row is sent again
 * is `decide`'s (the attempt cap); this only says what its reply is when it is not.
 */
export function replyForState(state: LedgerState): Reply {
  switch (state.status) {
    case 'DONE':
      return state.response !== null && state.code !== null
        ? definiteReply(state.code, state.response, true)
        : codeReply('E901', state.guid);
    case 'RECEIVED':
    case 'SENT':
      return codeReply('E903', state.guid);
    case 'UNKNOWN':
      return codeReply('E901', state.guid);
    case 'PURGED':
      return codeReply('E905', state.guid, { originalCode: state.code });
    case 'FAILED':
      return withRetryAfter(codeReply('E902', state.guid), notSentRetryAfterS(state.attempts));
  }
}

/** The E901 message of a new GUID held by the continuity window. */
export const CONTINUITY_HELD_MESSAGE =
  'outcome unknown: the ledger went back (failover or restore) and this GUID may have been sent before it; the account system could not yet confirm it never arrived, so it was not sent: resend later';

/** The E901 message of a GUID claimed as the ledger went back: not sent; the sweep and an inquiry settle it. */
export const CONTINUITY_CLAIMED_MESSAGE =
  'outcome unknown: the ledger went back (failover or restore) as this GUID was claimed, so it was not sent; it is settled by inquiry: resend later';

/**
 * The E901 of a request whose GUID must be asked about first (a resend of a row that may have arrived, a first send in
 * the continuity window) when the inquiry budget (`--inquiry-rate`) has no room now: nothing asked, nothing sent, and
 * `Retry-After` says when the budget will have room (whole seconds, at least 1).
 */
export function inquiryDeferredReply(guid: string, retryAfterMs: number): Reply {
  return withRetryAfter(codeReply('E901', guid, { message: INQUIRY_DEFERRED_MESSAGE }), Math.max(1, Math.ceil(retryAfterMs / 1000)));
}

export const INQUIRY_DEFERRED_MESSAGE =
  'outcome unknown: the account system must be asked about this GUID before it is sent, and inquiries are paced (--inquiry-rate); not asked, not sent: resend after Retry-After';

/** The reply to a Submit that `decide` refused: the GUID's request differs, or the row answers as it stands. */
export function replyForRefusal(guid: string, refusal: Refusal, maxAttempts: number): Reply {
  const { reason, state } = refusal;
  if (reason === 'fingerprint-mismatch') return codeReply('E904', guid);
  // A GUID the ledger does not know, held by the continuity window (CONTRACT.md §9): nothing claimed, nothing sent.
  if (state === null && (isHeld(reason) || reason === 'not-definite')) return codeReply('E901', guid, { message: CONTINUITY_HELD_MESSAGE });
  if (state === null) return codeReply('E503', guid);
  if (reason === 'attempt-cap') return withRetryAfter(codeReply('E902', state.guid, { message: `not sent; the attempt cap (${maxAttempts}) is used up` }), notSentRetryAfterS(state.attempts));
  // A FAILED row whose last attempt may have arrived (CONTRACT.md §7): not sent again while in doubt.
  if (isHeld(reason)) return codeReply('E901', state.guid, { message: heldReplyMessage(reason) });
  return replyForState(state);
}
