import * as E from 'fp-ts/lib/Either.js';
import type { EventAudit } from '../events/codecs.js';
import { decide, type Command } from '../events/decide.js';
import type { EventLog, LedgerClock, LedgerReadModel } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import type { AccountClient } from '../account/accountClient.js';
import type { Breaker } from './breaker.js';
import type { Metrics } from '../telemetry/metrics.js';
import { breakerRetryAfterS, CONTINUITY_CLAIMED_MESSAGE, codeReply, definiteReply, inquiryDeferredReply, ledgerUnavailableReply, notSentRetryAfterS, replyForRefusal, replyForState, withRetryAfter, type Reply } from './replies.js';
import { claimAfterInquiry, resendAfterInquiry, type AfterInquiry } from '../send/resendAfterInquiry.js';
import type { ClaimGate, ContinuityGate } from '../send/continuityGuard.js';
import { sendAudit, sendClaimed, type CallPermit, type SendLogger, type SendResult } from '../send/sendClaimed.js';
import { monotonicNow, sendWindowMs, timedWrite, type MonotonicClock } from '../send/sendWindow.js';
import { DEFAULTS } from '../shared/defaults.js';
import { decodeTransferRequest, type TransferRequest } from '../contract/transferRequest.js';
import { keptTrace, propagating, ROOT_CONTEXT, SpanKind, startSpan, type Context, type Tracing } from '../telemetry/tracing.js';

export interface RelayDeps {
  readonly store: EventLog & LedgerReadModel & LedgerClock;
  readonly account: AccountClient;
  readonly metrics: Metrics;
  readonly timeoutMs: number;
  readonly maxAttempts: number;
  /** A resend of a row that may have arrived needs its last Sent this old and a fresh inquiry (CONTRACT.md §7). */
  readonly minAgeMs?: number | undefined;
  /** The orphan sweep's grace (`--grace`): the send window is half of it (sendWindow.ts). Default: `--grace`'s. */
  readonly graceMs?: number | undefined;
  /** Stops calls while the account system keeps failing (CONTRACT.md §7); none: always call. */
  readonly breaker?: Breaker | undefined;
  /** What a row's age is judged by before an inquiry; default the ledger's clock (`store.now()`). */
  readonly clock?: (() => number | Promise<number>) | undefined;
  /** What the send window is measured on; default `performance.now` (tests hand in a clock they move). */
  readonly monotonicNow?: MonotonicClock | undefined;
  /** Where an E503's cause is logged (once per reply); without it the cause is dropped. */
  readonly log?: (line: Record<string, unknown>) => void;
  /** Where a withheld send and a stale answer are logged; without it only the metrics count them. */
  readonly sendLog?: SendLogger | undefined;
  /** The continuity guard (CONTRACT.md §9): asked before a GUID the ledger does not know is claimed. None: never asked. */
  readonly continuity?: ContinuityGate | undefined;
  /** Where the ledger writes' spans go (CONTRACT.md §10); default: none recorded, the trace context still passed on. */
  readonly tracing?: Tracing | undefined;
}

/** What belongs to one channel request rather than to the relay: its trace and its logger (whose lines name the trace). */
export interface RequestScope {
  /** The context of the request's server span: the ledger writes and the account calls are its children. */
  readonly trace?: Context | undefined;
  /** In place of `RelayDeps.log` and `sendLog` for this request. */
  readonly log?: ((line: Record<string, unknown>) => void) | undefined;
  readonly sendLog?: SendLogger | undefined;
}

/**
 * What the relay decided for a request, as its span says (`guidgate.decision`): `claimed` (a new GUID, sent),
 * `resent` (a FAILED row sent again), `replayed` (answered from the ledger), `in-progress`, `refused` (the ledger's
 * row answers it: E904, E905, the attempt cap, a held resend, UNKNOWN), `breaker-open`, `invalid` (E400),
 * `ledger-unavailable` (E503), `withheld` (claimed, not sent: the continuity guard's check after the claim).
 */
export type Decision = 'claimed' | 'resent' | 'replayed' | 'in-progress' | 'refused' | 'breaker-open' | 'invalid' | 'ledger-unavailable' | 'withheld';

/** The decision of a request the row answered as it stands. */
const answeredFromRow = (reply: Reply): Decision => (reply.replayed ? 'replayed' : reply.code === 'E903' ? 'in-progress' : 'refused');

export interface RelayResult {
  readonly reply: Reply;
  /** Known once the body decoded; for the request log. */
  readonly request?: TransferRequest;
  /**
   * Set when the ledger has the GUID (it had it, or this request claimed it): whether this request's fingerprint
   * is the one the GUID was claimed with. What the request record (src/relay/requestRecorder.ts) keeps.
   */
  readonly known?: { readonly fingerprintMatch: boolean };
  readonly decision: Decision;
}

const auditsByDeps = new WeakMap<RelayDeps, Map<string | undefined, EventAudit>>();
/** `sendAudit` made once per relay and key (the flags do not change while it runs): the store then encodes its actor once. */
function auditOf(deps: RelayDeps, channel: string | undefined): EventAudit {
  let byKey = auditsByDeps.get(deps);
  if (byKey === undefined) auditsByDeps.set(deps, (byKey = new Map()));
  let audit = byKey.get(channel);
  // `replied`: an outcome this request records is the channel's reply, so no notification for it (CONTRACT.md §11).
  if (audit === undefined) byKey.set(channel, (audit = { ...sendAudit(deps, channel), replied: true }));
  return audit;
}

/** Whether the row (if any) was claimed with this request's fingerprint, for the request record. */
const knownAs = (state: LedgerState | null, request: TransferRequest): Pick<RelayResult, 'known'> =>
  state === null ? {} : { known: { fingerprintMatch: state.fingerprint === request.fingerprint } };

/**
 * POST /v1/transfers, the contract's state table. The GUID is claimed and marked Sent durably before the
 * account system is called; a ledger that cannot be written means no call at all. `channel`: the name of the key
 * the request came with (keys on); a GUID claimed under another key is E904 and shows nothing.
 */
export async function relayTransfer(deps: RelayDeps, raw: Buffer, idempotencyKey: string | undefined, channel?: string, scope: RequestScope = {}): Promise<RelayResult> {
  const decoded = decodeTransferRequest(raw, idempotencyKey);
  if (E.isLeft(decoded)) return { reply: codeReply('E400', undefined, { message: decoded.left.message, field: decoded.left.field }), decision: 'invalid' };
  const request = decoded.right;
  const { store, maxAttempts } = deps;
  const log = scope.log ?? deps.log;
  const submit: Extract<Command, { type: 'Submit' }> = {
    type: 'Submit', request: request.body, fingerprint: request.fingerprint, ...(channel === undefined ? {} : { channel }), timeoutMs: deps.timeoutMs, maxAttempts,
    ...(deps.minAgeMs === undefined ? {} : { minAgeMs: deps.minAgeMs }),
  };

  const read = await store.getLedger(request.guid);
  if (E.isLeft(read)) return { reply: ledgerUnavailableReply(request.guid, read.left, log), request, decision: 'ledger-unavailable' };
  const existing = read.right;
  const known = knownAs(existing, request);
  // The common resend paths answer from one read and never touch the write path: `decide` on the row read
  // (pure; the time only stamps events that are not appended here) says whether a write would be refused.
  // A row that may have arrived is refused for want of an inquiry: that one goes on, to inquire first.
  let mayHaveArrived = false;
  if (existing !== null) {
    const refused = decide(existing, submit, 0);
    mayHaveArrived = E.isLeft(refused) && refused.left.reason === 'needs-inquiry';
    if (E.isLeft(refused) && !mayHaveArrived) {
      const reply = replyForRefusal(request.guid, refused.left, maxAttempts);
      return { reply, request, ...known, decision: answeredFromRow(reply) };
    }
  }

  // A GUID the ledger does not know, while the ledger may have gone back (CONTRACT.md §9): inquired about first.
  let window: { readonly wentBackAt: number } | null = null;
  let gateSeen: ClaimGate = { wentBack: 0, connections: 0 };
  // So is the resend of a row whose last send definitely did not reach (the forgotten log may have sent it since).
  if ((existing === null || !mayHaveArrived) && deps.continuity !== undefined) {
    const gate = await deps.continuity.beforeFirstClaim();
    if (E.isLeft(gate)) return { reply: ledgerUnavailableReply(request.guid, gate.left, log), request, decision: 'ledger-unavailable' };
    ({ window } = gate.right);
    gateSeen = gate.right;
  }

  // Checked before the claim: a request the breaker refuses leaves nothing in the ledger. A row whose earlier
  // attempt may have arrived is E901 then (its outcome is unknown until an inquiry), never "not sent".
  const permit = deps.breaker === undefined ? null : deps.breaker.permit();
  if (deps.breaker !== undefined && permit === null) {
    return mayHaveArrived
      ? { reply: codeReply('E901', request.guid, { message: 'outcome unknown; the account system is unavailable (breaker open), so it was not asked: resend later' }), request, ...known, decision: 'breaker-open' }
      : {
          reply: withRetryAfter(codeReply('E902', request.guid, { message: 'not sent; the account system is unavailable (breaker open), resend later' }), breakerRetryAfterS(deps.breaker.remainingMs())),
          request, ...known, decision: 'breaker-open',
        };
  }

  // Given back once however the request ends: by the call, with its outcome, else as "not called".
  const held = permit === null ? undefined : givenBackOnce(permit);
  try {
    return await claimAndSend(deps, { request, submit, existing, window, gateSeen, channel, scope, log }, held);
  } finally {
    held?.done(null);
  }
}

/** What `relayTransfer` knows of a request once it is to be claimed: the row read, the continuity gate's answer. */
interface ClaimContext {
  readonly request: TransferRequest;
  readonly submit: Extract<Command, { type: 'Submit' }>;
  readonly existing: LedgerState | null;
  readonly window: { readonly wentBackAt: number } | null;
  readonly gateSeen: ClaimGate;
  readonly channel: string | undefined;
  readonly scope: RequestScope;
  readonly log: ((line: Record<string, unknown>) => void) | undefined;
}

/** How a request's claim is written: a new GUID's plain claim, a new GUID's inquired about first (the continuity window), or a resend of its row. */
type ClaimPath =
  | { readonly kind: 'claim' }
  | { readonly kind: 'claim-after-inquiry'; readonly wentBackAt: number }
  | { readonly kind: 'resend'; readonly row: LedgerState };

function claimPath(existing: LedgerState | null, window: { readonly wentBackAt: number } | null): ClaimPath {
  if (existing !== null) return { kind: 'resend', row: existing };
  return window === null ? { kind: 'claim' } : { kind: 'claim-after-inquiry', wentBackAt: window.wentBackAt };
}

/** A permit whose first `done` counts and the rest do nothing, so that a caller can give it back in `finally`. */
function givenBackOnce(permit: CallPermit): CallPermit {
  let held = true;
  return {
    done(outcome) {
      if (!held) return;
      held = false;
      permit.done(outcome);
    },
  };
}

/** The claim (after an inquiry where one is due) and, once the row is SENT by this request, the call. */
async function claimAndSend(deps: RelayDeps, ctx: ClaimContext, permit: CallPermit | undefined): Promise<RelayResult> {
  const { store, maxAttempts } = deps;
  const { request, submit, existing, window, scope, log } = ctx;
  const trace = scope.trace ?? ROOT_CONTEXT;
  // Past the replay path: the key and the flags in force go into the actor of every event this request writes.
  const audit = auditOf(deps, ctx.channel);
  // The claim keeps this request's trace context, for the calls made later for the same transfer (CONTRACT.md §10).
  const write = startSpan(deps.tracing ?? propagating, 'ledger claim', SpanKind.INTERNAL, trace, { 'guidgate.guid': request.guid, 'guidgate.resend': existing !== null });
  const settleDeps = { store, account: deps.account, clock: deps.clock, metrics: deps.metrics, monotonicNow: deps.monotonicNow, trace: write.context };
  const path = claimPath(existing, window);
  let claim: AfterInquiry;
  switch (path.kind) {
    case 'claim':
      claim = await timedWrite(deps.monotonicNow ?? monotonicNow, () => store.execute(request.guid, claimWithTrace(submit, scope.trace), audit, { state: null }));
      break;
    case 'claim-after-inquiry':
      claim = await claimAfterInquiry(settleDeps, request.guid, claimWithTrace(submit, scope.trace), path.wentBackAt, audit);
      break;
    case 'resend':
      claim = await resendAfterInquiry(settleDeps, path.row, submit, audit, window);
      break;
  }
  write.span.end();
  const { startedAt, result, inquiryDeferredMs } = claim;
  const known = knownAs(existing, request);
  if (E.isLeft(result)) {
    return { reply: ledgerUnavailableReply(request.guid, result.left, log, existing?.attempts), request, ...known, decision: 'ledger-unavailable' };
  }
  // Someone moved first (another request, another process), or the inquiry before a resend said no: answer
  // from the state as it is now.
  if (result.right.kind === 'refused') {
    // Not asked for want of a turn under --inquiry-rate (decide heard "could not tell"): E901 with when to come back.
    const { refusal } = result.right;
    const reply = inquiryDeferredMs !== undefined && refusal.reason === 'inquiry-unclear' ? inquiryDeferredReply(request.guid, inquiryDeferredMs) : replyForRefusal(request.guid, refusal, maxAttempts);
    return { reply, request, ...knownAs(result.right.refusal.state, request), decision: answeredFromRow(reply) };
  }
  const claimed = result.right.state;
  // The inquiry before the resend (or before the first send, in the continuity window) found it processed: DONE,
  // and the stored answer is the reply.
  if (claimed.status !== 'SENT') {
    return { reply: replyForState(claimed), request, ...knownAs(claimed, request), decision: 'replayed' };
  }
  // A new GUID's claim, on a server that may have changed since the last check: sent only once a check made after the
  // claim finds the server known (CONTRACT.md §9); else the row stays SENT, never called, for the sweep and the
  // inquiry to settle. Inside the window too: the inquiry before the claim cannot see a going back after it.
  if (existing === null && deps.continuity !== undefined && !(await deps.continuity.afterFirstClaim(ctx.gateSeen))) {
    return { reply: codeReply('E901', request.guid, { message: CONTINUITY_CLAIMED_MESSAGE }), request, ...knownAs(claimed, request), decision: 'withheld' };
  }
  const sent = await sendClaimed(
    // The fields a send reads, named: spreading `deps` would copy every field the relay was built with, per transfer.
    { store: deps.store, account: deps.account, metrics: deps.metrics, monotonicNow: deps.monotonicNow, tracing: deps.tracing, sendLog: scope.sendLog ?? deps.sendLog, sendWindowMs: sendWindowMs(deps.graceMs ?? DEFAULTS.graceMs) },
    { state: claimed, startedAt, trace },
    permit,
    audit,
  );
  // The call was made and its outcome is not in the ledger (E901 to the channel): the operator must hear of it,
  // with the store's error, since the account system may have applied it.
  if (sent.sent && E.isLeft(sent.recorded)) {
    log?.({ guid: sent.guid, reply: 'E901', call: sent.call.kind, error: sent.recorded.left.code, cause: sent.recorded.left.message, what: 'sent, but the outcome could not be recorded' });
  }
  return { reply: replyForSend(sent), request, ...knownAs(claimed, request), decision: existing === null ? 'claimed' : 'resent' };
}

/** The Submit of a new GUID with the trace context its claim keeps (none without a request span). */
function claimWithTrace(submit: Extract<Command, { type: 'Submit' }>, trace: Context | undefined): Extract<Command, { type: 'Submit' }> {
  const kept = trace === undefined ? undefined : keptTrace(trace);
  return kept === undefined ? submit : { ...submit, trace: kept };
}

/** The channel's reply to a send (CONTRACT.md §2): the call's outcome if it was recorded, else the ledger's. */
export function replyForSend(r: SendResult): Reply {
  if (!r.sent) {
    // The ledger says SENT and nothing left; the sweep will make it UNKNOWN and an inquiry settle it.
    if (r.why === 'claim-too-slow') {
      return codeReply('E901', r.guid, { message: 'not sent: the ledger acknowledged the claim too late to call safely; the ledger holds it as sent, so it is settled by inquiry: resend later' });
    }
    // A purged request cannot be sent; nothing left, and the ledger is what is missing.
    return codeReply('E503', r.guid);
  }
  const { guid, call } = r;
  // The call was made but its outcome is not in the ledger: the request did leave.
  if (E.isLeft(r.recorded)) return codeReply('E901', guid);
  const recorded = r.recorded.right;
  if (recorded.recorded === false) {
    // The row moved while we were calling (the sweep, an inquiry, a later attempt): the ledger is the truth,
    // not this call's answer. An answer to a superseded attempt (an E500 from attempt 1 while attempt 2 is
    // in flight or done) must not reach the channel, and a row an inquiry settled replies with the stored
    // bytes, the same ones every later resend gets.
    if (recorded.state === null) return codeReply('E901', guid);
    // This call left (answered, or its outcome unknown) while the row became FAILED: "not sent" would be false.
    if (recorded.state.status === 'FAILED' && call.kind !== 'failed') return codeReply('E901', guid);
    return replyForState(recorded.state);
  }
  switch (call.kind) {
    case 'definite':
      return definiteReply(call.code, call.body, false);
    case 'unknown':
      return codeReply('E901', guid);
    case 'failed':
      return withRetryAfter(codeReply('E902', guid), notSentRetryAfterS(recorded.state.attempts));
  }
}
