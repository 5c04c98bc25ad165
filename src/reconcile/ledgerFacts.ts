import type { LedgerState } from '../events/state.js';
import { topLevelMembers } from '../json/topLevelMembers.js';
import { LedgerSourceError } from './errors.js';
import type { LedgerFacts, LedgerRecord, TransferTerms } from './types.js';

/** A ledger state (either store's row read back) as the record reconciliation reads. */
export function ledgerRecordOf(state: LedgerState): LedgerRecord {
  return { guid: state.guid, status: state.status, code: state.code, request: state.request, firstSentAt: state.createdAt };
}

const DIGITS = /^[0-9]+$/;

/**
 * The terms of a stored request (the channel's raw body, which the relay accepted: from, to and amount present,
 * amount written as digits, no contract field twice). The amount is exact: read from its digits whenever it is
 * past what a double holds. A request that does not read so is a ledger that was changed behind guidgate's back.
 */
export function termsOfRequest(guid: string, request: string): TransferTerms {
  const fail = (why: string): never => {
    throw new LedgerSourceError(`the stored request of ${guid} ${why}`);
  };
  let body: unknown;
  try {
    body = JSON.parse(request);
  } catch {
    return fail('is not JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return fail('is not a JSON object');
  const { from, to, amount, currency } = body as Record<string, unknown>;
  if (typeof from !== 'string' || typeof to !== 'string') return fail('has no from or to');
  if (currency !== undefined && typeof currency !== 'string') return fail('has a currency that is not a string');
  let exact: bigint;
  if (typeof amount === 'number' && Number.isSafeInteger(amount)) exact = BigInt(amount);
  else {
    const written = topLevelMembers(request).find((m) => m.key === 'amount')?.raw;
    if (typeof amount !== 'number' || written === undefined || !DIGITS.test(written)) return fail('has no integer amount');
    exact = BigInt(written!);
  }
  return { from, to, amount: exact, currency: currency ?? null };
}

/** A record with its request read; a tombstone (PURGED, no request) has no terms. */
export function factsOf(record: LedgerRecord): LedgerFacts {
  return {
    guid: record.guid,
    status: record.status,
    code: record.code,
    firstSentAt: record.firstSentAt,
    terms: record.request === null ? null : termsOfRequest(record.guid, record.request),
  };
}
