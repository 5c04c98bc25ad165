import * as E from 'fp-ts/lib/Either.js';
import type { EventStore } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import type { LedgerFailures } from '../settle/rows.js';
import type { AccountClient } from '../account/accountClient.js';
import type { Tracing } from '../telemetry/tracing.js';
import { interruptedExit, interruptible } from './interrupt.js';
import { age, err, guidsByOutcome, iso, out, printJson, type Exit } from './output.js';
import { startProgress } from './progress.js';
import { withLedger } from './withLedger.js';

/** The flags every row command (resolve, reprocess) has. */
export interface RowCliOptions {
  db: string; accountUrl: string; timeout: number; concurrency: number;
  limit?: number; dryRun?: boolean; json?: boolean;
}

/** What the runner hands the library function: its progress, interrupt and per-row hooks. */
export interface RowRunHooks {
  readonly dryRun: boolean | undefined;
  readonly signal: AbortSignal;
  onProgress(done: number, total: number): void;
  onRow(row: LedgerState, outcome: string, detail?: string): void;
}

/** One row command: its library function and how its summary reads. */
export interface RowCommand<S extends { readonly dryRun: boolean } & LedgerFailures> {
  readonly name: string;
  /** Row outcomes that are failures: the first one is shown on stderr, after `failureLabel`. */
  readonly failures: readonly string[];
  readonly failureLabel: string;
  /** A command that sends: the deadline of its claims (src/store/shared/writeDeadline.ts), the send window of its --grace. */
  readonly claimDeadlineMs?: number;
  run(deps: { store: EventStore; account: AccountClient; tracing: Tracing }, hooks: RowRunHooks): Promise<S>;
  exitCode(summary: S): Exit;
  summaryLine(summary: S): string;
  dryRunLine(summary: S): string;
  /** Lines under a dry run's summary line (what it left out and why). */
  dryRunNotes?(summary: S): string[];
}

async function withAccount<T>(url: string, timeoutMs: number, concurrency: number, work: (account: AccountClient, tracing: Tracing) => Promise<T>): Promise<T> {
  // undici and the relay's code are loaded only by the commands that call the account system.
  const { createAccountClient } = await import('../account/accountClient.js');
  // Spans exported as serve exports them (OTEL_EXPORTER_OTLP_ENDPOINT); the trace context is passed on always.
  const { startTracing } = await import('../telemetry/tracing.js');
  const tracing = startTracing();
  const account = createAccountClient({ baseUrl: url, timeoutMs, connections: Math.max(1, concurrency), tracing });
  try {
    return await work(account, tracing);
  } finally {
    await account.close();
    await tracing.shutdown();
  }
}

function candidateLine(row: LedgerState, now: number): string {
  const since = row.sentAt ?? row.updatedAt;
  return `${row.guid}  ${row.status}  attempts=${row.attempts}  ${row.sentAt === null ? 'updated' : 'sent'} ${iso(since)} (${age(now - since)} ago)`;
}

/**
 * Runs a row command as the command line does: progress on stderr, SIGINT/SIGTERM stops it gracefully, the
 * summary (or the dry run's candidates) on stdout, the first failure and why the exit status is 1 on stderr.
 */
export function runRowCommand<S extends { readonly dryRun: boolean } & LedgerFailures>(o: RowCliOptions, command: RowCommand<S>): Promise<Exit> {
  const name = command.name;
  return withLedger(name, o.db, (store) =>
    withAccount(o.accountUrl, o.timeout, o.concurrency, async (account, tracing) => {
      const { operatorRow } = await import('../events/policy.js');
      const progress = startProgress(name);
      const stop = interruptible(name);
      const listed: LedgerState[] = [];
      const named = guidsByOutcome();
      let firstFailure: string | undefined;
      const summary = await command.run({ store, account, tracing }, {
        dryRun: o.dryRun,
        signal: stop.signal,
        onProgress: (d, t) => progress.update(d, t),
        onRow: (row, outcome, detail) => {
          if (outcome === 'candidate') listed.push(row);
          else {
            named.add(outcome, row.guid);
            if (command.failures.includes(outcome) && firstFailure === undefined) firstFailure = `${row.guid}: ${outcome}${detail === undefined ? '' : ` (${detail})`}`;
          }
        },
      });
      progress.stop();
      stop.dispose();
      const unreachable = command.exitCode(summary) === 1 && summary.ledgerErrors === 0;
      const code = interruptedExit(name, stop.signal, command.exitCode(summary));
      if (o.json) {
        printJson({ ...summary, ...(summary.dryRun ? { rows: listed.map(operatorRow) } : { guids: named.json() }), exitCode: code });
      } else if (summary.dryRun) {
        // The ages shown by the ledger's clock (the one the run judged by); the host's if the ledger cannot say now.
        const now = E.getOrElse(() => Date.now())(await store.now());
        for (const row of listed) out(candidateLine(row, now));
        out(command.dryRunLine(summary));
        for (const line of command.dryRunNotes?.(summary) ?? []) out(line);
      } else {
        out(command.summaryLine(summary));
        for (const line of named.lines()) out(line);
      }
      if (firstFailure !== undefined) err(`guidgate ${name}: ${command.failureLabel}: ${firstFailure}`);
      if (summary.ledgerErrors > 0) err(`guidgate ${name}: the ledger failed (${summary.ledgerError ?? 'no cause given'}); the run stopped early (rows not reached are unchanged)`);
      else if (unreachable) err(`guidgate ${name}: the account system at ${o.accountUrl} could not be reached for any row`);
      return code;
    }),
    { claimDeadlineMs: command.claimDeadlineMs },
  );
}
