/**
 * The operator commands as the command line runs them (CONTRACT.md §5): open the ledger, call the library
 * function, print a summary (human or `--json`) on stdout, progress and problems on stderr, and return the
 * exit status: 0 done, 1 failed (ledger, or account system unreachable for every row), 2 bad usage (commander).
 */
import type { Status } from '../events/codecs.js';
import { LedgerCorruptError, LedgerUnavailableError } from '../events/errors.js';
import { openStore } from '../store/openStore.js';
import type { EventStore } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import { formatDuration } from '../cli/duration.js';
import type { AccountClient } from '../relay/accountClient.js';
import { readHistory } from './history.js';
import { ledgerView, listLedger } from './ledger.js';
import { startProgress } from './progress.js';
import { purgeDone, SHORT_RETENTION_MS } from './purge.js';
import { rebuildLedger, verifyLedger } from './rebuild.js';
import { ledgerStats } from './stats.js';

type Exit = 0 | 1;

const out = (line: string): void => void process.stdout.write(`${line}\n`);
const err = (line: string): void => void process.stderr.write(`${line}\n`);
const printJson = (value: unknown): void => out(JSON.stringify(value, null, 2));

export const iso = (ms: number): string => new Date(ms).toISOString();

/** 90061000 → `1d 1h 1m 1s`; under a second → `…ms`. */
export function age(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const parts: string[] = [];
  let s = Math.floor(ms / 1000);
  for (const [unit, size] of [['d', 86_400], ['h', 3_600], ['m', 60], ['s', 1]] as const) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`);
      s %= size;
    }
  }
  return parts.slice(0, 2).join(' ');
}

/** Opens the ledger, runs `work`, closes it; a ledger that cannot be opened, read or written exits 1. */
async function withLedger(command: string, db: string, work: (store: EventStore) => Promise<Exit>): Promise<Exit> {
  let store: EventStore;
  try {
    store = await openStore(db);
  } catch (e) {
    err(`guidgate ${command}: cannot open the ledger at ${db}: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
  try {
    return await work(store);
  } catch (e) {
    if (e instanceof LedgerUnavailableError) err(`guidgate ${command}: ledger unavailable (${db}): ${e.message}`);
    else if (e instanceof LedgerCorruptError) err(`guidgate ${command}: ledger corrupt (${db}): ${e.message}`);
    else throw e;
    return 1;
  } finally {
    await store.close();
  }
}

async function withAccount<T>(url: string, timeoutMs: number, concurrency: number, work: (account: AccountClient) => Promise<T>): Promise<T> {
  // undici and the relay's code are loaded only by the commands that call the account system.
  const { createAccountClient } = await import('../relay/accountClient.js');
  const account = createAccountClient({ baseUrl: url, timeoutMs, connections: Math.max(1, concurrency) });
  try {
    return await work(account);
  } finally {
    await account.close();
  }
}

/**
 * SIGINT/SIGTERM during a run: stop starting new rows, let the ones in flight finish and be recorded, print
 * the summary, exit 1. A second signal ends the process at once (every change is atomic; a send cut short is
 * a SENT row that the orphan sweep makes UNKNOWN).
 */
function interruptible(command: string): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    dispose();
    err(`guidgate ${command}: ${sig}: finishing the rows in flight, then stopping (send it again to stop at once)`);
    controller.abort();
  };
  const dispose = (): void => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return { signal: controller.signal, dispose };
}

function interruptedExit(command: string, signal: AbortSignal, code: Exit): Exit {
  if (!signal.aborted) return code;
  err(`guidgate ${command}: interrupted; rows not reached are unchanged`);
  return 1;
}

function candidateLine(row: LedgerState, now: number): string {
  const since = row.sentAt ?? row.updatedAt;
  return `${row.guid}  ${row.status}  attempts=${row.attempts}  ${row.sentAt === null ? 'updated' : 'sent'} ${iso(since)} (${age(now - since)} ago)`;
}

// ---------------------------------------------------------------------------------------------------------

export interface ResolveCliOptions {
  db: string; accountUrl: string; minAge: number; grace: number; timeout: number; concurrency: number;
  limit?: number; dryRun?: boolean; json?: boolean;
}

export function runResolve(o: ResolveCliOptions): Promise<Exit> {
  return withLedger('resolve', o.db, (store) =>
    withAccount(o.accountUrl, o.timeout, o.concurrency, async (account) => {
      const { resolveExitCode, resolveUnknown } = await import('./resolve.js');
      const progress = startProgress('resolve');
      const stop = interruptible('resolve');
      const listed: LedgerState[] = [];
      let firstFailure: string | undefined;
      const now = Date.now();
      const summary = await resolveUnknown({ store, account }, {
        minAgeMs: o.minAge, graceMs: o.grace, limit: o.limit, concurrency: o.concurrency, dryRun: o.dryRun, signal: stop.signal,
        onProgress: (d, t) => progress.update(d, t),
        onRow: (row, outcome, detail) => {
          if (outcome === 'candidate') listed.push(row);
          else if ((outcome === 'unreachable' || outcome === 'still-unknown' || outcome === 'ledger-error') && firstFailure === undefined) {
            firstFailure = `${row.guid}: ${outcome}${detail === undefined ? '' : `: ${detail}`}`;
          }
        },
      });
      progress.stop();
      stop.dispose();
      const unreachable = resolveExitCode(summary) === 1 && summary.ledgerErrors === 0;
      const code = interruptedExit('resolve', stop.signal, resolveExitCode(summary));
      if (o.json) {
        printJson({ ...summary, ...(summary.dryRun ? { rows: listed.map(ledgerView) } : {}), exitCode: code });
      } else if (summary.dryRun) {
        for (const row of listed) out(candidateLine(row, now));
        out(`resolve (dry run, nothing changed, nothing inquired): candidates=${summary.candidates} would-sweep-never-sent=${summary.swept.neverSent} would-sweep-orphaned=${summary.swept.orphaned} min-age=${formatDuration(o.minAge)}`);
      } else {
        out(
          `resolve: candidates=${summary.candidates} processed=${summary.processed} absent=${summary.absent} still-unknown=${summary.stillUnknown} ` +
            `unreachable=${summary.unreachable} skipped=${summary.skipped} ledger-errors=${summary.ledgerErrors} ` +
            `swept-never-sent=${summary.swept.neverSent} swept-orphaned=${summary.swept.orphaned}`,
        );
      }
      if (firstFailure !== undefined) err(`guidgate resolve: first inquiry failure: ${firstFailure}`);
      if (summary.ledgerErrors > 0) err('guidgate resolve: the ledger failed; the run stopped early (rows not reached are unchanged)');
      else if (unreachable) err(`guidgate resolve: the account system at ${o.accountUrl} could not be reached for any row`);
      return code;
    }),
  );
}

export interface ReprocessCliOptions {
  db: string; accountUrl: string; maxAttempts: number; timeout: number; concurrency: number; minAge: number;
  limit?: number; dryRun?: boolean; json?: boolean;
}

export function runReprocess(o: ReprocessCliOptions): Promise<Exit> {
  return withLedger('reprocess', o.db, (store) =>
    withAccount(o.accountUrl, o.timeout, o.concurrency, async (account) => {
      const { reprocessExitCode, reprocessFailed } = await import('./reprocess.js');
      const progress = startProgress('reprocess');
      const stop = interruptible('reprocess');
      const listed: LedgerState[] = [];
      let firstFailure: string | undefined;
      const now = Date.now();
      const summary = await reprocessFailed({ store, account }, {
        maxAttempts: o.maxAttempts, timeoutMs: o.timeout, minAgeMs: o.minAge, limit: o.limit, concurrency: o.concurrency, dryRun: o.dryRun, signal: stop.signal,
        onProgress: (d, t) => progress.update(d, t),
        onRow: (row, outcome, detail) => {
          if (outcome === 'candidate') listed.push(row);
          else if ((outcome === 'failed' || outcome === 'unknown' || outcome === 'ledger-error') && firstFailure === undefined) {
            firstFailure = `${row.guid}: ${outcome}${detail === undefined ? '' : ` (${detail})`}`;
          }
        },
      });
      progress.stop();
      stop.dispose();
      const unreachable = reprocessExitCode(summary) === 1 && summary.ledgerErrors === 0;
      const code = interruptedExit('reprocess', stop.signal, reprocessExitCode(summary));
      if (o.json) {
        printJson({ ...summary, ...(summary.dryRun ? { rows: listed.map(ledgerView) } : {}), exitCode: code });
      } else if (summary.dryRun) {
        for (const row of listed) out(candidateLine(row, now));
        out(`reprocess (dry run, nothing changed, nothing sent): candidates=${summary.candidates} max-attempts=${o.maxAttempts}`);
      } else {
        out(
          `reprocess: candidates=${summary.candidates} done=${summary.done} failed=${summary.failed} unknown=${summary.unknown} ` +
            `skipped=${summary.skipped} found=${summary.found} held=${summary.held} ledger-errors=${summary.ledgerErrors}`,
        );
      }
      if (firstFailure !== undefined) err(`guidgate reprocess: first failed send: ${firstFailure}`);
      if (summary.ledgerErrors > 0) err('guidgate reprocess: the ledger failed; the run stopped early (rows not reached are unchanged)');
      else if (unreachable) err(`guidgate reprocess: the account system at ${o.accountUrl} could not be reached for any row`);
      return code;
    }),
  );
}

export interface PurgeCliOptions { db: string; retention: number; tombstoneRetention: number; dryRun?: boolean; json?: boolean }

export function runPurge(o: PurgeCliOptions): Promise<Exit> {
  if (o.retention < SHORT_RETENTION_MS) {
    err(`guidgate purge: warning: retention ${formatDuration(o.retention)} is under a day; channels may still resend within it, and a resend after the purge gets E905 instead of the answer`);
  }
  return withLedger('purge', o.db, async (store) => {
    const progress = startProgress('purge');
    const stop = interruptible('purge');
    const summary = await purgeDone({ store }, {
      retentionMs: o.retention, tombstoneRetentionMs: o.tombstoneRetention, dryRun: o.dryRun, signal: stop.signal,
      onProgress: (d, t) => progress.update(d, t),
    });
    progress.stop();
    stop.dispose();
    const code = interruptedExit('purge', stop.signal, 0);
    if (o.json) printJson({ ...summary, exitCode: code });
    else if (summary.dryRun) {
      out(`purge (dry run, nothing changed): would-purge=${summary.candidates} would-remove-tombstones=${summary.tombstonesRemoved} bytes=${summary.bytesBefore} retention=${formatDuration(o.retention)} tombstone-retention=${formatDuration(o.tombstoneRetention)}`);
    } else {
      out(
        `purge: candidates=${summary.candidates} purged=${summary.purged} skipped=${summary.candidates - summary.purged} ` +
          `tombstones-removed=${summary.tombstonesRemoved} bytes-before=${summary.bytesBefore} bytes-after=${summary.bytesAfter}`,
      );
    }
    return code;
  });
}

export function runHistory(o: { db: string; guid: string; json?: boolean }): Promise<Exit> {
  return withLedger('history', o.db, async (store) => {
    const events = await readHistory(store, o.guid);
    if (events.length === 0) {
      err(`guidgate history: no such GUID in the ledger: ${o.guid}`);
      return 1;
    }
    if (o.json) {
      printJson(events);
      return 0;
    }
    for (const e of events) out(`${String(e.seq).padStart(3)}  ${iso(e.at)}  ${e.type.padEnd(13)}  ${JSON.stringify(e.data)}`);
    const row = await store.getLedger(o.guid);
    out(`${o.guid}: ${events.length} events; now ${row?.status ?? '(no ledger row)'}${row?.code == null ? '' : ` ${row.code}`}`);
    return 0;
  });
}

export function runLedger(o: { db: string; status?: Status[]; olderThan?: number; limit?: number; json?: boolean }): Promise<Exit> {
  return withLedger('ledger', o.db, async (store) => {
    const now = Date.now();
    const rows = listLedger(store, { statuses: o.status, olderThanMs: o.olderThan, limit: o.limit, clock: () => now });
    const counts = new Map<string, number>();
    let n = 0;
    if (o.json) process.stdout.write('[');
    else out(`${'GUID'.padEnd(28)}  ${'STATUS'.padEnd(8)}  ${'CODE'.padEnd(4)}  ATT  ${'CREATED'.padEnd(24)}  ${'UPDATED'.padEnd(24)}  AGE`);
    for await (const row of rows) {
      counts.set(row.status, (counts.get(row.status) ?? 0) + 1);
      if (o.json) process.stdout.write(`${n === 0 ? '\n' : ',\n'}  ${JSON.stringify(ledgerView(row))}`);
      else out(`${row.guid.padEnd(28)}  ${row.status.padEnd(8)}  ${(row.code ?? '-').padEnd(4)}  ${String(row.attempts).padStart(3)}  ${iso(row.createdAt)}  ${iso(row.updatedAt)}  ${age(now - row.updatedAt)}`);
      n++;
    }
    if (o.json) process.stdout.write(n === 0 ? ']\n' : '\n]\n');
    else out(`${n} rows${n === 0 ? '' : ` (${[...counts].map(([s, c]) => `${s} ${c}`).join(', ')})`}`);
    return 0;
  });
}

export function runStats(o: { db: string; maxAttempts: number; json?: boolean }): Promise<Exit> {
  return withLedger('stats', o.db, async (store) => {
    const s = await ledgerStats(store, { maxAttempts: o.maxAttempts });
    if (o.json) {
      printJson(s);
      return 0;
    }
    for (const [status, count] of Object.entries(s.rows)) out(`${status.padEnd(9)} ${count}`);
    out(`${'total'.padEnd(9)} ${s.total}`);
    for (const status of ['UNKNOWN', 'FAILED'] as const) {
      const oldest = s.oldest[status];
      out(`oldest ${status}: ${oldest === null ? '-' : `${age(oldest.ageMs)} (last change ${iso(oldest.updatedAt)})`}`);
    }
    out(`FAILED at the attempt cap (${s.deadLetters.maxAttempts}), needing a person: ${s.deadLetters.count}`);
    return 0;
  });
}

export function runRebuild(o: { db: string; verify?: boolean; json?: boolean }): Promise<Exit> {
  return withLedger('rebuild', o.db, async (store) => {
    if (o.verify !== true) {
      const { rows } = await rebuildLedger(store);
      if (o.json) printJson({ rebuilt: true, rows });
      else out(`rebuild: the projection was rebuilt from the log: rows=${rows}`);
      return 0;
    }
    const diffs = await verifyLedger(store);
    if (o.json) printJson({ equal: diffs.length === 0, differences: diffs });
    else {
      for (const d of diffs) {
        const cols = d.columns.map((c) => `${c}: ledger=${JSON.stringify(d.values[c]?.ledger)} log=${JSON.stringify(d.values[c]?.log)}`).join('; ');
        out(`${d.guid}  ${d.kind}${cols === '' ? '' : `  ${cols}`}`);
      }
      out(diffs.length === 0 ? 'rebuild --verify: the projection matches the log: differences=0' : `rebuild --verify: the projection differs from the log: differences=${diffs.length} (guidgate rebuild repairs it)`);
    }
    return diffs.length === 0 ? 0 : 1;
  });
}
