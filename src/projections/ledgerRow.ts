import * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either.js';
import { Status } from '../events/codecs.js';
import { LedgerCorruptError } from '../events/errors.js';
import type { LedgerState } from '../events/state.js';

const Int = t.refinement(t.number, Number.isSafeInteger, 'Int');
const NullableInt = t.union([Int, t.null]);
const NullableString = t.union([t.string, t.null]);

/** A `ledger` row as either store returns it; decoded, never cast. */
export const LedgerRowCodec = t.type({
  guid: t.string,
  status: Status,
  code: NullableString,
  request: NullableString,
  response: NullableString,
  fingerprint: t.string,
  channel: NullableString,
  attempts: Int,
  created_at: Int,
  updated_at: Int,
  last_seq: Int,
  sent_at: NullableInt,
  timeout_ms: NullableInt,
  /** 0 or 1: an integer column in both stores (SQLite has no booleans). */
  failed_by_inquiry: t.union([t.literal(0), t.literal(1)]),
});
export type LedgerRow = t.TypeOf<typeof LedgerRowCodec>;

export const LEDGER_COLUMNS = [
  'guid', 'status', 'code', 'request', 'response', 'fingerprint', 'channel', 'attempts',
  'created_at', 'updated_at', 'last_seq', 'sent_at', 'timeout_ms', 'failed_by_inquiry',
] as const;

/**
 * A row read as its values in LEDGER_COLUMNS order (a raw read: the driver builds no object with a property per
 * column, which costs more than the read itself) as the row `rowToState` decodes. One literal, so every row has
 * the same shape; a unit test holds it to LEDGER_COLUMNS.
 */
export function rowFromValues(v: readonly unknown[]): Record<(typeof LEDGER_COLUMNS)[number], unknown> {
  return {
    guid: v[0], status: v[1], code: v[2], request: v[3], response: v[4], fingerprint: v[5], channel: v[6], attempts: v[7],
    created_at: v[8], updated_at: v[9], last_seq: v[10], sent_at: v[11], timeout_ms: v[12], failed_by_inquiry: v[13],
  };
}

export function rowToState(raw: unknown): LedgerState {
  const decoded = LedgerRowCodec.decode(raw);
  if (isLeft(decoded)) {
    const guid = typeof raw === 'object' && raw !== null && 'guid' in raw ? String(raw.guid) : '?';
    throw new LedgerCorruptError(`ledger row ${guid} does not decode`);
  }
  const r = decoded.right;
  return {
    guid: r.guid,
    status: r.status,
    code: r.code,
    request: r.request,
    response: r.response,
    fingerprint: r.fingerprint,
    channel: r.channel,
    attempts: r.attempts,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    lastSeq: r.last_seq,
    sentAt: r.sent_at,
    timeoutMs: r.timeout_ms,
    failedByInquiry: r.failed_by_inquiry === 1,
  };
}

export function stateToRow(s: LedgerState): LedgerRow {
  return {
    guid: s.guid,
    status: s.status,
    code: s.code,
    request: s.request,
    response: s.response,
    fingerprint: s.fingerprint,
    channel: s.channel,
    attempts: s.attempts,
    created_at: s.createdAt,
    updated_at: s.updatedAt,
    last_seq: s.lastSeq,
    sent_at: s.sentAt,
    timeout_ms: s.timeoutMs,
    failed_by_inquiry: s.failedByInquiry ? 1 : 0,
  };
}

/** The columns in which two states differ (empty when equal). */
export function diffStates(a: LedgerState, b: LedgerState): string[] {
  const ra = stateToRow(a);
  const rb = stateToRow(b);
  return LEDGER_COLUMNS.filter((c) => ra[c] !== rb[c]);
}
