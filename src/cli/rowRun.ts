import * as E from 'fp-ts/lib/Either.js';
import type { EventStore } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import type { LedgerFailures } from '../commands/rows.js';
import type { AccountClient } from '../account/accountClient.js';
import type { Tracing } from '../telemetry/tracing.js';
import { interruptedExit, interruptible } from './interrupt.js';
import { age, err, guidsByOutcome, iso, NAMED_ON_TERMINAL, out, printJson, type Exit } from './output.js';
import { startProgress } from './progress.js';
import { withLedger } from './withLedger.js';

/** The flags every row command (resolve, reprocess) has. */
export interface RowCliOptions {
  db: string; accountUrl: string; timeout: number; concurrency: number; inquiryRate: string;
  limit?: number; dryRun?: boolean; json?: boolean; continuityDir?: string;
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
  /** Lines under the summary, a dry run's or a real run's: what the run left out and why. */
  notes?(summary: S): string[];
  /** Why a row ended as it did where its outcome alone does not say (reprocess's `held`), with `now` by the ledger's clock; undefined: nothing to add. */
  explain?(row: LedgerState, outcome: string, detail: string | undefined, now: number): string | undefined;
}

async function withAccount<T>(o: Pick<RowCliOptions, 'accountUrl' | 'timeout' | 'concurrency' | 'inquiryRate'>, work: (account: AccountClient, tracing: Tracing) => Promise<T>): Promise<T> {
  // undici and the relay's code are loaded only by the commands that call the account system.
  const { createAccountClient } = await import('../account/accountClient.js');
  const { inquiryPacing } = await import('../account/inquiryPacer.js');
  // Spans exported as serve exports them (OTEL_EXPORTER_OTLP_ENDPOINT); the trace context is passed on always.
  const { startTracing } = await import('../telemetry/tracing.js');
  const tracing = startTracing();
  const account = createAccountClient({
    baseUrl: o.accountUrl, timeoutMs: o.timeout, connections: Math.max(1, o.concurrency), tracing,
    inquiryPacing: inquiryPacing(o.inquiryRate, { forChannels: false }),
  });
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

/** `  GUID: why`, for the first few rows (by GUID) that `explain` has something to say of, and how many more. */
function explanations<S extends { readonly dryRun: boolean } & LedgerFailures>(command: RowCommand<S>, rows: ReadonlyArray<{ row: LedgerState; outcome: string; detail: string | undefined }>, now: number): string[] {
  const lines = [...rows]
    .sort((a, b) => (a.row.guid < b.row.guid ? -1 : a.row.guid > b.row.guid ? 1 : 0))
    .flatMap(({ row, outcome, detail }) => {
      const why = command.explain?.(row, outcome, detail, now);
      return why === undefined ? [] : [`  ${row.guid}: ${why}`];
    });
  const rest = lines.length - NAMED_ON_TERMINAL;
  return rest > 0 ? [...lines.slice(0, NAMED_ON_TERMINAL), `  …${rest} more`] : lines;
}

/**
 * Runs a row command as the command line does: progress on stderr, SIGINT/SIGTERM stops it gracefully, the
 * summary (or the dry run's candidates) on stdout, the first failure and why the exit status is 1 on stderr.
 */
export function runRowCommand<S extends { readonly dryRun: boolean } & LedgerFailures>(o: RowCliOptions, command: RowCommand<S>): Promise<Exit> {
  const name = command.name;
  return withLedger(name, o.db, (store) =>
    withAccount(o, async (account, tracing) => {
      const { operatorRow } = await import('../events/policy.js');
      const progress = startProgress(name);
      const stop = interruptible(name);
      const listed: LedgerState[] = [];
      const explained: Array<{ row: LedgerState; outcome: string; detail: string | undefined }> = [];
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
            if (command.explain !== undefined) explained.push({ row, outcome, detail });
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
      } else {
        // The ages shown by the ledger's clock (the one the run judged by); the host's if the ledger cannot say now.
        const now = E.getOrElse(() => Date.now())(await store.now());
        if (summary.dryRun) {
          for (const row of listed) out(candidateLine(row, now));
          out(command.dryRunLine(summary));
        } else {
          out(command.summaryLine(summary));
          for (const line of named.lines()) out(line);
          for (const line of explanations(command, explained, now)) out(line);
        }
        for (const line of command.notes?.(summary) ?? []) out(line);
      }
      if (firstFailure !== undefined) err(`guidgate ${name}: ${command.failureLabel}: ${firstFailure}`);
      if (summary.ledgerErrors > 0) err(`guidgate ${name}: the ledger failed (${summary.ledgerError ?? 'no cause given'}); the run stopped early (rows not reached are unchanged)`);
      else if (unreachable) err(`guidgate ${name}: the account system at ${o.accountUrl} could not be reached for any row`);
      return code;
    }),
    { claimDeadlineMs: command.claimDeadlineMs, writes: o.dryRun !== true, continuityDir: o.continuityDir },
  );
}
