import * as E from 'fp-ts/lib/Either.js';
import type { EventStore } from '../events/store.js';
import { isSameClaim } from '../events/decide.js';
import type { LedgerState } from '../events/state.js';
import type { AccountClient } from './accountClient.js';
import type { Metrics } from './metrics.js';
import { recordOutcome } from './recordOutcome.js';
import { codeReply, definiteReply, replyForState, type Reply } from './replies.js';
import { decodeTransferRequest, type TransferRequest } from './transferRequest.js';

export interface RelayDeps {
  readonly store: EventStore;
  readonly account: AccountClient;
  readonly metrics: Metrics;
  readonly timeoutMs: number;
  readonly maxAttempts: number;
  readonly log?: (line: Record<string, unknown>) => void;
}

export interface RelayResult {
  readonly reply: Reply;
  /** Known once the body decoded; for the request log. */
  readonly request?: TransferRequest;
}

/**
 * POST /v1/transfers, the contract's state table. The GUID is claimed and marked Sent durably before the
 * account system is called; a ledger that cannot be written means no call at all. `channel`: the name of the key
 * the request came with (keys on); a GUID claimed under another key is E904 and shows nothing.
 */
export async function relayTransfer(deps: RelayDeps, raw: Buffer, idempotencyKey: string | undefined, channel?: string): Promise<RelayResult> {
  const decoded = decodeTransferRequest(raw, idempotencyKey);
  if (E.isLeft(decoded)) return { reply: codeReply('E400', undefined, { message: decoded.left.message, field: decoded.left.field }) };
  const request = decoded.right;
  const { store, maxAttempts } = deps;

  let existing: LedgerState | null;
  try {
    existing = await store.getLedger(request.guid);
  } catch {
    return { reply: codeReply('E503', request.guid), request };
  }
  // The common resend paths answer from one read and never touch the write path.
  if (existing !== null) {
    if (!isSameClaim(existing, request.fingerprint, channel)) return { reply: codeReply('E904', request.guid), request };
    if (existing.status !== 'FAILED' || existing.attempts >= maxAttempts) return { reply: replyForState(existing, maxAttempts), request };
  }

  let claimed: LedgerState;
  try {
    const result = await store.execute(request.guid, {
      type: 'Submit',
      request: request.body,
      fingerprint: request.fingerprint,
      ...(channel === undefined ? {} : { channel }),
      timeoutMs: deps.timeoutMs,
      maxAttempts,
    });
    if (result.kind === 'refused') {
      // Someone moved first (another request, another process): answer from the state as it is now.
      const { reason, state } = result.refusal;
      if (reason === 'fingerprint-mismatch') return { reply: codeReply('E904', request.guid), request };
      return { reply: state === null ? codeReply('E503', request.guid) : replyForState(state, maxAttempts), request };
    }
    claimed = result.state;
  } catch {
    return { reply: codeReply('E503', request.guid), request };
  }

  return { reply: await sendClaimed(deps, claimed), request };
}

/**
 * Sends a row this process has just moved to SENT (its stored bytes, never the resend's) and records the
 * outcome. Shared by the relay and `reprocess`.
 */
export async function sendClaimed(deps: Pick<RelayDeps, 'store' | 'account' | 'metrics' | 'maxAttempts'>, claimed: LedgerState): Promise<Reply> {
  const { guid, attempts: attempt } = claimed;
  if (claimed.request === null) return codeReply('E503', guid);
  const outcome = await deps.account.transfer(claimed.request);
  deps.metrics.call(outcome.kind, outcome.latencyMs);
  const recorded = await recordOutcome(deps.store, guid, attempt, outcome);

  if (recorded.recorded === 'error') return codeReply('E901', guid);
  if (recorded.recorded === false) {
    // The row moved while we were calling (the sweep, an inquiry, a later attempt): the ledger is the truth,
    // not this call's answer. An answer to a superseded attempt (an E500 from attempt 1 while attempt 2 is
    // in flight or done) must not reach the channel, and a row an inquiry settled replies with the stored
    // bytes, the same ones every later resend gets.
    return recorded.state === null ? codeReply('E901', guid) : replyForState(recorded.state, deps.maxAttempts);
  }
  switch (outcome.kind) {
    case 'definite':
      return definiteReply(outcome.code, outcome.body, false);
    case 'unknown':
      return codeReply('E901', guid);
    case 'failed':
      return codeReply('E902', guid);
  }
}
