import type { Command } from 'commander';
import type { EventStore } from '../events/store.js';
import type { ReportFormat, ReconcileWindow, ReconcileProgress, JournalInput, JournalFormat, ColumnNames } from '../reconcile/index.js';
import type { RecordRun } from '../commands/reconcileRun.js';
import { accountUrlFlag, concurrencyFlag, continuityDirFlag, dbFlag, flag, graceFlag, inquiryRateFlag, intArg, jsonFlag, timeLimitArg, timeoutFlag } from './options.js';
import { DEFAULTS } from '../shared/defaults.js';
import { err, setExit, type Exit } from './output.js';
import { startProgress, type Progress } from './progress.js';
import { withLedger } from './withLedger.js';

export interface ReconcileCliOptions {
  from?: string; to?: string; pending?: string;
  accountUrl?: string; journal?: string; columns?: string;
  /** The journal file's format, when its name does not say it (`--format csv|ndjson`). */
  format?: string;
  settle?: boolean; json?: boolean; csv?: boolean; showAccounts?: boolean;
  /** False with `--no-record`: the run is not recorded in the ledger. */
  record?: boolean;
  db: string; continuityDir?: string; timeout: number; grace: number; concurrency: number; inquiryRate: string;
  journalTimeout: number;
  maxBreaks: number;
}

/** What the options say, checked before the ledger is opened: a bad one is bad usage (exit 2) naming the flag. */
interface Plan {
  readonly window: ReconcileWindow;
  readonly columns: ColumnNames | undefined;
  readonly format: ReportFormat;
  /** The journal file's format: `--format`, else by its name's extension; undefined for the account system's (NDJSON). */
  readonly journalFormat: JournalFormat | undefined;
}

/**
 * Where a finished run is recorded in the ledger (CONTRACT.md §8: window, source, SHA-256, counts, breaks with the
 * run that first saw them): the store's `recordReconciliation` (`recordIn`), which gives back each break's first-seen
 * run for the report; a ledger that cannot record it fails the run (exit 1).
 */
export function recordRunIn(store: EventStore): RecordRun {
  return async (run) => {
    const { recordIn } = await import('../commands/reconciliations.js');
    return recordIn(store)(run);
  };
}

async function plan(o: ReconcileCliOptions): Promise<Plan> {
  const { parseWindow, parseColumns, journalFormatOf, parseJournalFormat, JOURNAL_FORMATS, ReconcileUsageError } = await import('../reconcile/index.js');
  const window = parseWindow({ from: o.from, to: o.to, pending: o.pending });
  if (o.journal === undefined && o.accountUrl === undefined) {
    throw new ReconcileUsageError('--journal', 'give --journal FILE, or --account-url URL to read GET {url}/journal');
  }
  let journalFormat: JournalFormat | undefined;
  if (o.format !== undefined) {
    const given = parseJournalFormat(o.format);
    if (given === null) throw new ReconcileUsageError('--format', `'${o.format}' is not a journal format: ${JOURNAL_FORMATS.join(' or ')}`);
    if (o.journal === undefined) throw new ReconcileUsageError('--format', "says a --journal FILE's format; the account system's journal (--account-url) is always NDJSON");
    journalFormat = given;
  } else if (o.journal !== undefined) {
    const byName = journalFormatOf(o.journal);
    if (byName === null) throw new ReconcileUsageError('--journal', `cannot tell the format of ${o.journal}: name it .csv, .ndjson or .jsonl, or say it with --format csv|ndjson`);
    journalFormat = byName;
  }
  if (o.settle === true && o.accountUrl === undefined) {
    throw new ReconcileUsageError('--settle', 'needs --account-url: the inquiries go to the account system');
  }
  if (o.json === true && o.csv === true) throw new ReconcileUsageError('--csv', 'give --json or --csv, not both');
  let columns: ColumnNames | undefined;
  if (o.columns !== undefined) {
    if (o.journal === undefined || journalFormat !== 'csv') {
      throw new ReconcileUsageError('--columns', "maps a CSV journal's header names: give it with --journal FILE.csv (or --format csv)");
    }
    columns = parseColumns(o.columns);
  }
  return { window, columns, format: o.json === true ? 'json' : o.csv === true ? 'csv' : 'terminal', journalFormat };
}

/** The journal's progress on stderr: its bytes while read and staged, then the entries while compared. */
function reconcileProgress(): { update(p: ReconcileProgress): void; stop(): void } {
  let phase: ReconcileProgress['phase'] | null = null;
  let bar: Progress | null = null;
  return {
    update(p) {
      if (p.phase !== phase) {
        bar?.stop();
        phase = p.phase;
        bar = startProgress(`reconcile: ${p.phase === 'journal' ? 'reading the journal' : 'comparing'}`, { unit: p.phase === 'journal' ? 'bytes' : 'entries' });
      }
      bar!.update(p.done, p.total ?? p.done);
    },
    stop() {
      bar?.stop();
    },
  };
}

export async function runReconcile(o: ReconcileCliOptions, usage: (message: string) => never): Promise<Exit> {
  const rec = await import('../reconcile/index.js');
  let p: Plan;
  try {
    p = await plan(o);
  } catch (e) {
    if (e instanceof rec.ReconcileUsageError) usage(`guidgate reconcile: ${e.message}`);
    throw e;
  }
  return withLedger('reconcile', o.db, async (store) => {
    const { reconcileRun, settlementLine } = await import('../commands/reconcileRun.js');
    const report = rec.reportWriter(p.format, process.stdout, { showAccounts: o.showAccounts === true });
    const given = o.journal ?? `${o.accountUrl}/journal`;
    const notFinished = async (e: Error & { code?: string }, started: boolean): Promise<Exit> => {
      if (!started) await report.start({ window: p.window, source: given });
      await report.fail(e);
      err(`guidgate reconcile: the run did not finish: ${e.message}`);
      return 1;
    };
    let journal: JournalInput;
    try {
      journal =
        o.journal !== undefined
          ? await rec.openJournalFile(o.journal, p.journalFormat)
          : await rec.openJournalUrl(o.accountUrl!, rec.journalRange(p.window), { timeoutMs: Math.max(o.timeout, 60_000), deadlineMs: o.journalTimeout });
    } catch (e) {
      if (rec.isReconcileError(e)) return notFinished(e, false);
      throw e;
    }
    const account = o.settle === true
      ? (await import('../account/accountClient.js')).createAccountClient({ baseUrl: o.accountUrl!, timeoutMs: o.timeout, connections: o.concurrency, inquiryPacing: (await import('../account/inquiryPacer.js')).inquiryPacing(o.inquiryRate, { forChannels: false }) })
      : undefined;
    const progress = reconcileProgress();
    await report.start({ window: p.window, source: journal.source });
    try {
      const run = await reconcileRun({
        store,
        window: p.window,
        journal,
        columns: p.columns,
        onProgress: (q) => progress.update(q),
        settle: account === undefined ? undefined : { account, graceMs: o.grace, concurrency: o.concurrency },
        // The breaks are printed once recorded, when the ledger has said since which run each is open (firstSeen).
        // --no-record: nothing written for the run (a rerun of a window in another form); firstSeen stays null.
        record: o.record === false ? undefined : recordRunIn(store),
        maxBreaks: o.maxBreaks,
      });
      progress.stop();
      for (const b of run.breaks) await report.write(b);
      const settled = run.settlements;
      const recorded = run.id === null ? 'not recorded (--no-record)' : `recorded in the ledger as reconciliation run ${run.id}`;
      if (p.format === 'json') {
        await report.end(run.summary, { run: run.id, ...(o.settle === true ? { settled } : {}) });
      } else {
        await report.end(run.summary);
        // The terminal form says what --settle did after the summary; the CSV form keeps stdout to the breaks.
        const say = p.format === 'terminal' ? (l: string) => void process.stdout.write(`${l}\n`) : err;
        say(recorded);
        if (o.settle === true) {
          say(settled.length === 0 ? 'settle: nothing to settle (no unsettled_in_ledger or rejected_in_ledger break)' : `settle: ${settled.length} inquired`);
          for (const s of settled) say(settlementLine(s));
        }
      }
      if (run.summary.breaks > 0) {
        err(`guidgate reconcile: ${run.summary.breaks} break${run.summary.breaks === 1 ? '' : 's'} (P1 ${run.summary.severities.P1}, P2 ${run.summary.severities.P2})`);
        return 1;
      }
      return 0;
    } catch (e) {
      progress.stop();
      if (rec.isReconcileError(e)) return notFinished(e, true);
      await report.fail(e as Error);
      throw e;
    } finally {
      await journal.close();
      await account?.close();
    }
  }, { writes: true, continuityDir: o.continuityDir });
}


export function registerReconcile(program: Command): void {
  const command = program
    .command('reconcile')
    .description("compare the ledger with the account system's journal over a window; one line per break, then the summary (exit 1 on a break)")
    .addOption(flag('--from <time>', 'start of the window, inclusive: ms since the epoch or ISO 8601 with an offset (2024-05-01T00:00:00+08:00)'))
    .addOption(flag('--to <time>', 'end of the window, exclusive (same forms as --from)'))
    .addOption(flag('--pending <duration>', 'a transfer sent this close to --to may be posted after it: not yet a break (default: 1h)'))
    .addOption(accountUrlFlag().makeOptionMandatory(false))
    .addOption(flag('--journal <file>', 'the journal as a file: CSV with a header (.csv) or NDJSON (.ndjson, .jsonl); read instead of GET {account-url}/journal'))
    .addOption(flag('--journal-timeout <duration>', 'the whole journal read over HTTP (--account-url) within this, or the run fails').argParser(timeLimitArg).default(DEFAULTS.reconcileJournalTimeoutMs, '15m'))
    .addOption(flag('--max-breaks <n>', 'breaks one run keeps at most (in memory until it is recorded); one more stops the run, nothing recorded').argParser(intArg(1)).default(DEFAULTS.reconcileMaxBreaks))
    .addOption(flag('--format <format>', "the --journal file's format, csv or ndjson, when its name does not say it (default: by its extension: .csv; .ndjson, .jsonl)"))
    .addOption(flag('--columns <map>', "a CSV journal's own header names: guid=TXN_NO,amount=AMT,…"))
    .addOption(flag('--settle', 'inquire about every unsettled_in_ledger and rejected_in_ledger GUID, whatever its age, and record the answer as resolve does (never sends a transfer)'))
    .addOption(jsonFlag('print one JSON object: {window, source, sha256, counts, breaks, …}'))
    .addOption(flag('--csv', 'print the breaks as CSV (header, one row per break)'))
    .addOption(flag('--no-record', 'do not record this run in the ledger (every run is recorded by default: window, source, SHA-256, counts, breaks); for a rerun of a window already recorded, in another form'))
    .addOption(flag('--show-accounts', 'print account numbers whole (masked to their last 4 characters by default)'))
    .addOption(timeoutFlag('deadline of one inquiry (--settle)'))
    .addOption(concurrencyFlag('inquiries in flight at once (--settle)'))
    .addOption(inquiryRateFlag('inquiries --settle makes at most (50/s, 600/m; 0: no cap): over it each waits its turn, the oldest row first'))
    .addOption(graceFlag("grace of the orphan sweep before a SENT row is inquired about (as serve's --grace)"))
    .addOption(dbFlag())
    .addOption(continuityDirFlag());
  command.action(async (o: ReconcileCliOptions) => {
    setExit(await runReconcile(o, (message) => command.error(message, { exitCode: 2, code: 'guidgate.usage' })));
  });
}
