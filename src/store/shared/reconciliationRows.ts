/**
 * Recorded reconciliation runs (CONTRACT.md §8) as both stores keep them: a `reconciliations` row per run (the
 * summary as JSON text beside the columns it is listed and alerted by) and a `reconciliation_breaks` row per break
 * (its sides as JSON text). Amounts are written as strings of digits: exact whatever their size. Rows read back
 * are decoded, never cast (LedgerCorruptError); what would be written is checked first (TypeError, nothing written).
 */
import * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either.js';
import { Status } from '../../events/codecs.js';
import { LedgerCorruptError } from '../../events/errors.js';
import {
  CATEGORIES,
  NO_POSTING_KINDS,
  type Break,
  type NoPostingKind,
  type NoPostingTally,
  type Category,
  type CategoryMoney,
  type JournalEntry,
  type LedgerFacts,
  type MoneyByCurrency,
  type ReconcileResult,
  type ReconcileSummary,
  type RecordedReconciliation,
  type RecordedRun,
} from '../../events/reconciliation.js';

/** The run's row, as written (the id and the time are the store's). */
export interface RunRow {
  readonly window_from: number;
  readonly window_to: number;
  readonly source: string;
  readonly sha256: string;
  readonly breaks: number;
  readonly p1: number;
  readonly p2: number;
  readonly summary: string;
}

/** A break's row, as written, less its run and its first-seen run (the store's, by `firstSeenOf`). */
export interface BreakRow {
  readonly guid: string;
  readonly category: string;
  readonly severity: string;
  readonly ledger: string | null;
  readonly journal: string;
  /** When its sides happened (first sent; each posting applied): which earlier runs covered it (firstSeenOf). */
  readonly instants: readonly number[];
}

const digits = (n: bigint): string => n.toString();
const moneyJson = (m: MoneyByCurrency): Array<[string | null, string]> => [...m].map(([c, a]) => [c, digits(a)]);

function checkSummary(s: ReconcileSummary): void {
  const { from, to, pendingMs } = s.window;
  if (![from, to, pendingMs].every(Number.isSafeInteger)) throw new TypeError('reconciliation run: window is malformed');
  if (typeof s.source !== 'string' || !/^[0-9a-f]{64}$/.test(s.sha256)) throw new TypeError('reconciliation run: source or sha256 is malformed');
  for (const c of CATEGORIES) if (!Number.isSafeInteger(s.counts[c])) throw new TypeError(`reconciliation run: counts.${c} is malformed`);
}

function checkBreak(b: Break): void {
  if (typeof b.guid !== 'string' || !CATEGORIES.includes(b.category) || (b.severity !== 'P1' && b.severity !== 'P2')) {
    throw new TypeError('reconciliation break is malformed');
  }
}

export function encodeRun(result: ReconcileResult): { run: RunRow; breaks: BreakRow[] } {
  const s = result.summary;
  checkSummary(s);
  const summary = {
    window: s.window,
    source: s.source,
    sha256: s.sha256,
    bytes: s.bytes,
    counts: s.counts,
    money: Object.fromEntries(CATEGORIES.map((c) => [c, { ledger: moneyJson(s.money[c].ledger), journal: moneyJson(s.money[c].journal) }])),
    journal: s.journal,
    ledgerRows: s.ledgerRows,
    matchedWithoutTerms: s.matchedWithoutTerms,
    ...(s.noPosting === undefined ? {} : { noPosting: Object.fromEntries(NO_POSTING_KINDS.map((k) => [k, { count: s.noPosting![k].count, ledger: moneyJson(s.noPosting![k].ledger) }])) }),
    breaks: s.breaks,
    severities: s.severities,
  };
  const seen = new Set<string>();
  const breaks = result.breaks.map((b) => {
    checkBreak(b);
    if (seen.has(b.guid)) throw new TypeError(`reconciliation run: ${b.guid} has two breaks`);
    seen.add(b.guid);
    return encodeBreak(b);
  });
  return {
    run: { window_from: s.window.from, window_to: s.window.to, source: s.source, sha256: s.sha256, breaks: breaks.length, p1: s.severities.P1, p2: s.severities.P2, summary: JSON.stringify(summary) },
    breaks,
  };
}

function encodeBreak(b: Break): BreakRow {
  const l = b.ledger;
  const ledger =
    l === null
      ? null
      : JSON.stringify({ status: l.status, code: l.code, firstSentAt: l.firstSentAt, terms: l.terms === null ? null : { ...l.terms, amount: digits(l.terms.amount) } });
  const journal = JSON.stringify(b.journal.map((e) => ({ ref: e.ref, from: e.from, to: e.to, amount: digits(e.amount), currency: e.currency, appliedAt: e.appliedAt, line: e.line })));
  const instants = [...(l === null ? [] : [l.firstSentAt]), ...b.journal.map((e) => e.appliedAt)];
  return { guid: b.guid, category: b.category, severity: b.severity, ledger, journal, instants };
}

/** An earlier run's window, for `firstSeenOf`. */
export interface EarlierRun {
  readonly id: number;
  readonly from: number;
  readonly to: number;
}
/** An earlier run's break of the same GUID. */
export interface EarlierBreak {
  readonly runId: number;
  readonly category: string;
  readonly firstSeen: number;
}

/**
 * The run that first saw a break (CONTRACT.md §8: a break still open in a later run keeps its first-seen run). The
 * break's previous run is the latest earlier run that covered it, one whose window [from, to) holds one of its
 * instants (when the transfer was first sent, when a posting was applied): the same day run again, not yesterday's
 * run over other transfers. If that run flagged the GUID in the same category, the break keeps that break's first-seen
 * run; otherwise (first seen now, or gone in between: settled, then broken again) it is this run. `earlierRuns`
 * newest first.
 */
export function firstSeenOf(row: BreakRow, runId: number, earlierRuns: readonly EarlierRun[], earlierBreaks: readonly EarlierBreak[]): number {
  const previous = earlierRuns.find((r) => r.id < runId && row.instants.some((at) => at >= r.from && at < r.to));
  if (previous === undefined) return runId;
  const same = earlierBreaks.find((b) => b.runId === previous.id && b.category === row.category);
  return same?.firstSeen ?? runId;
}

// Reading back.

const Int = t.refinement(t.number, Number.isSafeInteger, 'Int');
const Digits = t.refinement(t.string, (s) => /^-?\d+$/.test(s), 'Digits');
const Money = t.array(t.tuple([t.union([t.string, t.null]), Digits]));
const CountsCodec = t.type(Object.fromEntries(CATEGORIES.map((c) => [c, Int])) as Record<Category, typeof Int>);
const NoPostingCodec = t.type({ count: Int, ledger: Money });
const SummaryCodec = t.intersection([t.type({
  window: t.type({ from: Int, to: Int, pendingMs: Int }),
  source: t.string,
  sha256: t.string,
  bytes: Int,
  counts: CountsCodec,
  money: t.record(t.string, t.type({ ledger: Money, journal: Money })),
  journal: t.type({ read: Int, outsideRange: Int, notJudged: Int }),
  ledgerRows: Int,
  matchedWithoutTerms: Int,
  breaks: Int,
  severities: t.type({ P1: Int, P2: Int }),
}), t.partial({ noPosting: t.type({ rejected: NoPostingCodec, unsettled: NoPostingCodec }) })]);
const RunRowCodec = t.type({ id: Int, recorded_at: Int, summary: t.string });
const CategoryCodec = t.keyof(Object.fromEntries(CATEGORIES.filter((c) => c !== 'matched' && c !== 'pending').map((c) => [c, null])) as Record<Break['category'], null>);
const LedgerCodec = t.type({
  status: Status,
  code: t.union([t.string, t.null]),
  firstSentAt: Int,
  terms: t.union([t.null, t.type({ from: t.string, to: t.string, amount: Digits, currency: t.union([t.string, t.null]) })]),
});
const EntryCodec = t.type({ ref: t.string, from: t.string, to: t.string, amount: Digits, currency: t.union([t.string, t.null]), appliedAt: Int, line: Int });
const BreakRowCodec = t.type({
  run_id: Int,
  guid: t.string,
  category: CategoryCodec,
  severity: t.union([t.literal('P1'), t.literal('P2')]),
  first_seen: Int,
  ledger: t.union([t.string, t.null]),
  journal: t.string,
});

function parsed<A>(codec: t.Decoder<unknown, A>, text: string, what: string): A {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new LedgerCorruptError(`${what} is not JSON`);
  }
  const decoded = codec.decode(json);
  if (isLeft(decoded)) throw new LedgerCorruptError(`${what} does not decode`);
  return decoded.right;
}

const moneyOf = (m: ReadonlyArray<readonly [string | null, string]>): MoneyByCurrency => new Map(m.map(([c, a]) => [c, BigInt(a)]));

/** A `reconciliations` row (`id`, `recorded_at`, `summary`) as the run it records. */
export function rowToRun(raw: unknown): RecordedRun {
  const row = RunRowCodec.decode(raw);
  if (isLeft(row)) throw new LedgerCorruptError('reconciliation run row does not decode');
  const { id, recorded_at, summary } = row.right;
  const s = parsed(SummaryCodec, summary, `reconciliation run ${id}`);
  const money = Object.fromEntries(
    CATEGORIES.map((c) => {
      const m = s.money[c];
      if (m === undefined) throw new LedgerCorruptError(`reconciliation run ${id}: money.${c} is missing`);
      return [c, { ledger: moneyOf(m.ledger), journal: moneyOf(m.journal) } satisfies CategoryMoney];
    }),
  ) as Record<Category, CategoryMoney>;
  const { noPosting: apart, ...rest } = s;
  const noPosting = apart === undefined ? undefined : ({ rejected: { count: apart.rejected.count, ledger: moneyOf(apart.rejected.ledger) }, unsettled: { count: apart.unsettled.count, ledger: moneyOf(apart.unsettled.ledger) } } satisfies Record<NoPostingKind, NoPostingTally>);
  return { id: String(id), recordedAt: recorded_at, summary: { ...rest, money, ...(noPosting === undefined ? {} : { noPosting }) } };
}

/** A `reconciliation_breaks` row as the break it records, `firstSeen` filled. */
export function rowToBreak(raw: unknown): Break {
  const row = BreakRowCodec.decode(raw);
  if (isLeft(row)) throw new LedgerCorruptError('reconciliation break row does not decode');
  const { run_id, guid, category, severity, first_seen } = row.right;
  const where = `reconciliation ${run_id}, break ${guid}`;
  const l = row.right.ledger === null ? null : parsed(LedgerCodec, row.right.ledger, where);
  const ledger: LedgerFacts | null =
    l === null ? null : { guid, status: l.status, code: l.code, firstSentAt: l.firstSentAt, terms: l.terms === null ? null : { ...l.terms, amount: BigInt(l.terms.amount) } };
  const journal: JournalEntry[] = parsed(t.array(EntryCodec), row.right.journal, where).map((e) => ({ guid, ...e, amount: BigInt(e.amount) }));
  return { guid, category, severity, ledger, journal, firstSeen: String(first_seen) };
}

/** A run id as the stores key it (a positive integer); anything else names no run. */
export function runIdOf(id: string): number | null {
  if (!/^[1-9]\d{0,15}$/.test(id)) return null;
  const n = Number(id);
  return Number.isSafeInteger(n) ? n : null;
}

/** The run as recorded, from what was recorded: its id, its time and each break's first-seen run. */
export function recordedOf(result: ReconcileResult, id: number, at: number, firstSeen: readonly number[]): RecordedReconciliation {
  return {
    id: String(id),
    recordedAt: at,
    summary: result.summary,
    breaks: result.breaks.map((b, i) => ({ ...b, firstSeen: String(firstSeen[i]) })),
  };
}

/** Runs listed before `beforeId` (all when absent); a bad id lists none. */
export function listBefore(beforeId: string | undefined): number | null {
  return beforeId === undefined ? Number.MAX_SAFE_INTEGER : runIdOf(beforeId);
}
