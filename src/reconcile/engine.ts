import { createHash } from 'node:crypto';
import { classify } from './classify.js';
import { CONTRACT_COLUMN_NAMES, type ColumnNames } from './columns.js';
import { csvEntries } from './csvJournal.js';
import { LedgerSourceError } from './errors.js';
import type { JournalInput } from './journalInput.js';
import { compareGuids, stageJournal, type JournalGroup, type StagedJournal } from './journalStage.js';
import { factsOf } from './ledgerFacts.js';
import { ndjsonEntries } from './ndjsonJournal.js';
import { Tally } from './tally.js';
import type { Break, JournalEntry, LedgerRecord, ReconcileSummary, ReconcileWindow, Verdict } from './types.js';
import { checkedUtf8 } from './utf8Lines.js';

/**
 * The ledger side of a run, read by the caller from either store.
 * - `window(from, to)`: the rows first sent in [from, to) (LedgerRecord.firstSentAt), each GUID once, in
 *   ascending code point order of the GUID (SQLite `ORDER BY guid`; PostgreSQL `ORDER BY guid COLLATE "C"`),
 *   read in pages: the run holds one row at a time. A row out of order or outside the window stops the run.
 * - `lookup(guids)`: the rows of these GUIDs, whenever they were first sent (a journal entry in the window for
 *   a transfer sent before it); at most LOOKUP_BATCH GUIDs a call, ascending; a GUID without a row is left out.
 */
export interface LedgerSource {
  window(from: number, to: number): AsyncIterable<LedgerRecord>;
  lookup(guids: readonly string[]): Promise<readonly LedgerRecord[]>;
}

export const LOOKUP_BATCH = 500;
/** GUIDs judged but not yet handed on while lookups are gathered: bounds the memory, keeps breaks in GUID order. */
const MAX_QUEUED = 5000;

export interface ReconcileProgress {
  /** `journal`: reading and staging the journal (done/total in bytes); `compare`: the merge (in staged entries). */
  readonly phase: 'journal' | 'compare';
  readonly done: number;
  /** null when unknown (an HTTP journal without a Content-Length). */
  readonly total: number | null;
}

export interface ReconcileRun {
  readonly window: ReconcileWindow;
  /** The journal's bytes (journalInput.ts): for the API form, asked over journalRange(window). */
  readonly journal: JournalInput;
  /** A CSV's header names (parseColumns); the contract's names by default. */
  readonly columns?: ColumnNames;
  readonly ledger: LedgerSource;
  /** Each break, in ascending GUID order, as soon as it is known; awaited (a slow sink slows the run, never the memory). */
  readonly onBreak: (b: Break) => void | Promise<void>;
  /** Every GUID judged, with its verdict, breaks or not (in GUID order); for callers that keep more than the breaks. */
  readonly onJudged?: (guid: string, verdict: Verdict) => void;
  readonly onProgress?: (p: ReconcileProgress) => void;
  /** Where the staged journal goes (a private folder, deleted at the end); the OS temp folder by default. */
  readonly tempDir?: string;
}

async function* metered(bytes: AsyncIterable<Uint8Array>, onChunk: (chunk: Uint8Array) => void): AsyncGenerator<Uint8Array> {
  for await (const chunk of bytes) {
    onChunk(chunk);
    yield chunk;
  }
}

interface Slot {
  readonly guid: string;
  ledger: LedgerRecord | null;
  readonly entries: readonly JournalEntry[];
  readonly lookup: boolean;
}

/**
 * Reconciles the journal against the ledger over the window (CONTRACT.md §8, docs/reconciliation-rules.md):
 * stages the journal in a temporary SQLite file keyed by GUID while hashing its bytes, then merge-joins it in GUID
 * order against the ledger's window, judging each GUID once (classify). Breaks go to `onBreak` as they are found;
 * the summary (counts and money per category and per side) is the result. Throws a ReconcileError when the run
 * cannot finish (a bad journal line, a journal that could not be read, a ledger source out of order); the
 * temporary file is deleted either way.
 */
export async function reconcile(run: ReconcileRun): Promise<ReconcileSummary> {
  const { window, journal, ledger } = run;
  const hash = createHash('sha256');
  let bytes = 0;
  const progress = run.onProgress ?? (() => {});
  const counted = metered(journal.bytes, (chunk) => {
    hash.update(chunk);
    bytes += chunk.byteLength;
    progress({ phase: 'journal', done: bytes, total: journal.size });
  });
  const checked = checkedUtf8(counted);
  const batches = journal.format === 'csv' ? csvEntries(checked, run.columns ?? CONTRACT_COLUMN_NAMES) : ndjsonEntries(checked);
  let staged: StagedJournal;
  try {
    staged = await stageJournal(batches, window, run.tempDir === undefined ? {} : { dir: run.tempDir });
  } catch (err) {
    await journal.close();
    throw err;
  }
  try {
    const merged = await mergeJoin(staged, run, progress);
    const tally = merged.tally;
    const counts = { ...tally.counts };
    return {
      window,
      source: journal.source,
      sha256: hash.digest('hex'),
      bytes,
      counts,
      money: tally.money(),
      journal: { read: staged.staged + staged.outsideRange, outsideRange: staged.outsideRange, notJudged: merged.notJudged },
      ledgerRows: tally.ledgerRows,
      matchedWithoutTerms: tally.matchedWithoutTerms,
      noPosting: tally.noPostings(),
      breaks: tally.severities.P1 + tally.severities.P2,
      severities: { ...tally.severities },
    };
  } finally {
    staged.close();
  }
}

async function mergeJoin(staged: StagedJournal, run: ReconcileRun, progress: (p: ReconcileProgress) => void): Promise<{ tally: Tally; notJudged: number }> {
  const { window, ledger } = run;
  const tally = new Tally();
  let notJudged = 0;
  let consumed = 0;
  let queue: Slot[] = [];
  let lookups: string[] = [];

  const judge = async (slot: Slot): Promise<void> => {
    const facts = slot.ledger === null ? null : factsOf(slot.ledger);
    const verdict = classify(facts, slot.entries, window);
    tally.add(verdict, facts, slot.entries);
    run.onJudged?.(slot.guid, verdict);
    if (verdict.severity !== null) {
      await run.onBreak({
        guid: slot.guid,
        category: verdict.category as Break['category'],
        severity: verdict.severity,
        ledger: facts,
        journal: slot.entries,
        firstSeen: null,
      });
    }
  };
  const flush = async (): Promise<void> => {
    if (lookups.length > 0) {
      const asked = new Set(lookups);
      const found = new Map<string, LedgerRecord>();
      for (const record of await ledger.lookup(lookups)) {
        if (!asked.has(record.guid)) throw new LedgerSourceError(`the ledger's lookup returned ${record.guid}, which was not asked for`);
        found.set(record.guid, record);
      }
      for (const slot of queue) if (slot.lookup) slot.ledger = found.get(slot.guid) ?? null;
    }
    const ready = queue;
    queue = [];
    lookups = [];
    for (const slot of ready) await judge(slot);
  };
  const take = async (slot: Slot): Promise<void> => {
    if (slot.lookup) lookups.push(slot.guid);
    if (lookups.length === 0) return judge(slot);
    queue.push(slot);
    if (lookups.length >= LOOKUP_BATCH || queue.length >= MAX_QUEUED) await flush();
  };

  const groups = staged.groups();
  const rows = ledger.window(window.from, window.to)[Symbol.asyncIterator]();
  let lastGuid: string | null = null;
  const nextRow = async (): Promise<LedgerRecord | null> => {
    const r = await rows.next();
    if (r.done === true) return null;
    const row = r.value;
    if (lastGuid !== null && compareGuids(lastGuid, row.guid) >= 0) {
      throw new LedgerSourceError(`the ledger's window is not in ascending GUID order: ${row.guid} came after ${lastGuid}`);
    }
    if (row.firstSentAt < window.from || row.firstSentAt >= window.to) {
      throw new LedgerSourceError(`the ledger's window holds ${row.guid}, first sent at ${row.firstSentAt}, outside [${window.from}, ${window.to})`);
    }
    lastGuid = row.guid;
    return row;
  };
  const nextGroup = (): JournalGroup | null => {
    const g = groups.next();
    if (g.done === true) return null;
    consumed += g.value.entries.length;
    if (consumed % 1024 < g.value.entries.length) progress({ phase: 'compare', done: consumed, total: staged.staged });
    return g.value;
  };

  try {
    let row = await nextRow();
    let group = nextGroup();
    while (row !== null || group !== null) {
      const order = row === null ? 1 : group === null ? -1 : compareGuids(row.guid, group.guid);
      if (order < 0) {
        await take({ guid: row!.guid, ledger: row, entries: [], lookup: false });
        row = await nextRow();
      } else if (order > 0) {
        const g = group!;
        if (g.inWindow) await take({ guid: g.guid, ledger: null, entries: g.entries, lookup: true });
        else notJudged += g.entries.length;
        group = nextGroup();
      } else {
        await take({ guid: row!.guid, ledger: row, entries: group!.entries, lookup: false });
        row = await nextRow();
        group = nextGroup();
      }
    }
    await flush();
    progress({ phase: 'compare', done: consumed, total: staged.staged });
  } finally {
    groups.return(undefined);
    await rows.return?.();
  }
  return { tally, notJudged };
}
