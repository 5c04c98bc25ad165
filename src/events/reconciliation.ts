/**
 * Reconciliation runs as data (CONTRACT.md §8): the categories, a break and its two sides, a run's summary, and a run
 * as the ledger records it. The domain's, like the events: src/reconcile computes them, the stores record them
 * (ReconciliationLog, store.ts), the operator API, history and metrics show them.
 */
import type { Status } from './codecs.js';

/** The categories of CONTRACT.md §8, in the order a summary lists them. */
export const CATEGORIES = [
  'duplicate_in_journal',
  'amount_mismatch',
  'rejected_in_ledger',
  'unsettled_in_ledger',
  'missing_in_journal',
  'missing_in_ledger',
  'pending',
  'matched',
] as const;
export type Category = (typeof CATEGORIES)[number];

/**
 * A GUID with no posting whose row does not say done 0000: both sides agree that no money moved (so far). CONTRACT.md
 * §8 gives it no category: it is neither a break nor `matched` (DONE 0000 and one posting), and is counted apart, by
 * what the row says: `rejected` (DONE or PURGED with B2xx or E500), `unsettled` (RECEIVED, SENT, UNKNOWN, FAILED).
 */
export const NO_POSTING_KINDS = ['rejected', 'unsettled'] as const;
export type NoPostingKind = (typeof NO_POSTING_KINDS)[number];

/** The GUIDs of one kind without a posting: how many, and the sum of their requests' amounts (the journal side is 0). */
export interface NoPostingTally {
  readonly count: number;
  readonly ledger: MoneyByCurrency;
}

/** P1: money moved wrongly or a resend would move it twice; P2: to investigate; null: not a break. */
export type Severity = 'P1' | 'P2' | null;

/** One posting of the account system's journal, read exactly. */
export interface JournalEntry {
  readonly guid: string;
  /** The account system's own id of the posting. */
  readonly ref: string;
  readonly from: string;
  readonly to: string;
  /** Minor units, exact whatever its size (a JSON number past 2^53 is not rounded). */
  readonly amount: bigint;
  readonly currency: string | null;
  /** Milliseconds since the epoch. */
  readonly appliedAt: number;
  /** Line of the journal it was read from (1-based, the header of a CSV is line 1). */
  readonly line: number;
}

/** The transfer a request asked for: the fields the journal is compared on. */
export interface TransferTerms {
  readonly from: string;
  readonly to: string;
  readonly amount: bigint;
  readonly currency: string | null;
}

/** A ledger record with its request parsed; `terms` is null for a tombstone. */
export interface LedgerFacts {
  readonly guid: string;
  readonly status: Status;
  readonly code: string | null;
  readonly firstSentAt: number;
  readonly terms: TransferTerms | null;
}

/**
 * The run's window (CONTRACT.md §8), in ms since the epoch: ledger rows first sent in [from, to), journal entries
 * applied in [from, to); `pendingMs` is the slack on both edges (docs/reconciliation-rules.md).
 */
export interface ReconcileWindow {
  readonly from: number;
  readonly to: number;
  readonly pendingMs: number;
}

/** One break: a GUID whose two sides disagree. */
export interface Break {
  readonly guid: string;
  readonly category: Exclude<Category, 'matched' | 'pending'>;
  readonly severity: 'P1' | 'P2';
  readonly ledger: LedgerFacts | null;
  /** Every entry of this GUID the run read, in journal order. */
  readonly journal: readonly JournalEntry[];
  /** The id of the recorded run that first saw this break; filled by whoever records runs (null until then). */
  readonly firstSeen: string | null;
}

/** Sums of amounts per currency; the key `null` is the bucket of entries or requests without a currency. */
export type MoneyByCurrency = ReadonlyMap<string | null, bigint>;

export interface CategoryMoney {
  /** Sum of the requests' amounts of the GUIDs in the category (a tombstone has none). */
  readonly ledger: MoneyByCurrency;
  /** Sum of the amounts of every entry of those GUIDs (a duplicate counts each posting). */
  readonly journal: MoneyByCurrency;
}

export interface JournalCounts {
  /** Entries read from the journal (every line but a CSV's header and blank lines). */
  readonly read: number;
  /** Entries applied outside [from − pending, to + pending): checked, then not used (a file may span more days). */
  readonly outsideRange: number;
  /** Entries within that range whose GUID this run does not judge (applied before `from` or from `to` on, for a GUID not sent in the window). */
  readonly notJudged: number;
}

export interface ReconcileSummary {
  readonly window: ReconcileWindow;
  /** The journal's file path or URL (without credentials). */
  readonly source: string;
  /** SHA-256 (hex) of every journal byte read. */
  readonly sha256: string;
  readonly bytes: number;
  /** GUIDs per category; every category is present. */
  readonly counts: Readonly<Record<Category, number>>;
  readonly money: Readonly<Record<Category, CategoryMoney>>;
  readonly journal: JournalCounts;
  /** Ledger rows the run judged: those first sent in the window plus those looked up for the journal's GUIDs. */
  readonly ledgerRows: number;
  /** `matched` GUIDs judged on a tombstone: a PURGED row keeps no request, so their terms were not compared. */
  readonly matchedWithoutTerms: number;
  /**
   * GUIDs with no posting and no claim of one (NoPostingKind), counted apart from the categories. Absent from runs
   * recorded before it existed (they counted these GUIDs as `matched`).
   */
  readonly noPosting?: Readonly<Record<NoPostingKind, NoPostingTally>>;
  /** Breaks of every category (counts less `matched` and `pending`), and how many of each severity. */
  readonly breaks: number;
  readonly severities: { readonly P1: number; readonly P2: number };
}

/** A finished run as the ledger records it: the engine's summary and every break it found (`onBreak`), in GUID order. */
export interface ReconcileResult {
  readonly summary: ReconcileSummary;
  readonly breaks: readonly Break[];
}

/** A run as the ledger holds it: its id (the `firstSeen` of the breaks it saw first), when it was recorded, its summary. */
export interface RecordedRun {
  readonly id: string;
  /** When the run was recorded (ms), by the ledger's clock. */
  readonly recordedAt: number;
  readonly summary: ReconcileSummary;
}

/** A recorded run with its breaks, each with the run that first saw it (`firstSeen` never null here). */
export interface RecordedReconciliation extends RecordedRun {
  readonly breaks: readonly Break[];
}

/** One GUID's break as one recorded run saw it (the GUID's reconciliation history). */
export interface RecordedBreak {
  readonly run: RecordedRun;
  readonly break: Break;
}
