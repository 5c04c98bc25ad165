import type { Command } from 'commander';
import type { LedgerState } from '../events/state.js';
import { formatDuration } from './duration.js';
import { accountUrlFlag, concurrencyFlag, dbFlag, dryRunFlag, durationArg, flag, jsonFlag, limitFlag } from './options.js';
import { err, out, printJson, setExit, type Exit } from './output.js';
import { candidateLine, withAccount } from './rowRun.js';
import { withLedger } from './withLedger.js';
import { interruptedExit, interruptible } from './interrupt.js';
import { startProgress } from './progress.js';

export interface ResolveCliOptions {
  db: string; accountUrl: string; minAge: number; grace: number; timeout: number; concurrency: number;
  limit?: number; dryRun?: boolean; json?: boolean;
}

export function runResolve(o: ResolveCliOptions): Promise<Exit> {
  return withLedger('resolve', o.db, (store) =>
    withAccount(o.accountUrl, o.timeout, o.concurrency, async (account) => {
      const { ledgerView } = await import('../commands/ledger.js');
      const { resolveExitCode, resolveUnknown } = await import('../commands/resolve.js');
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

export function registerResolve(program: Command): void {
  program
    .command('resolve')
    .description('sweep orphans, then settle UNKNOWN rows whose last send is at least --min-age old by asking the account system')
    .addOption(accountUrlFlag())
    .addOption(flag('--min-age <duration>', 'only rows whose last Sent is at least this old (longer than the account system may take to process)').argParser(durationArg).default(60_000, '60s'))
    .addOption(limitFlag())
    .addOption(dryRunFlag('list the candidates; sweep, inquire and change nothing'))
    .addOption(concurrencyFlag('inquiries in flight at once'))
    .addOption(flag('--grace <duration>', 'grace of the orphan sweep run first').argParser(durationArg).default(5000, '5s'))
    .addOption(flag('--timeout <duration>', 'deadline of one inquiry').argParser(durationArg).default(3000, '3s'))
    .addOption(dbFlag())
    .addOption(jsonFlag())
    .action(async (o: ResolveCliOptions) => {
      setExit(await runResolve(o));
    });
}
