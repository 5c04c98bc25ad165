import type { Command } from 'commander';
import type { LedgerState } from '../events/state.js';
import { accountUrlFlag, concurrencyFlag, dbFlag, dryRunFlag, durationArg, flag, intArg, jsonFlag, limitFlag } from './options.js';
import { err, out, printJson, setExit, type Exit } from './output.js';
import { candidateLine, withAccount } from './rowRun.js';
import { withLedger } from './withLedger.js';
import { interruptedExit, interruptible } from './interrupt.js';
import { startProgress } from './progress.js';

export interface ReprocessCliOptions {
  db: string; accountUrl: string; maxAttempts: number; timeout: number; concurrency: number;
  limit?: number; dryRun?: boolean; json?: boolean;
}

export function runReprocess(o: ReprocessCliOptions): Promise<Exit> {
  return withLedger('reprocess', o.db, (store) =>
    withAccount(o.accountUrl, o.timeout, o.concurrency, async (account) => {
      const { ledgerView } = await import('../commands/ledger.js');
      const { reprocessExitCode, reprocessFailed } = await import('../commands/reprocess.js');
      const progress = startProgress('reprocess');
      const stop = interruptible('reprocess');
      const listed: LedgerState[] = [];
      let firstFailure: string | undefined;
      const now = Date.now();
      const summary = await reprocessFailed({ store, account }, {
        maxAttempts: o.maxAttempts, timeoutMs: o.timeout, limit: o.limit, concurrency: o.concurrency, dryRun: o.dryRun, signal: stop.signal,
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
            `skipped=${summary.skipped} ledger-errors=${summary.ledgerErrors}`,
        );
      }
      if (firstFailure !== undefined) err(`guidgate reprocess: first failed send: ${firstFailure}`);
      if (summary.ledgerErrors > 0) err('guidgate reprocess: the ledger failed; the run stopped early (rows not reached are unchanged)');
      else if (unreachable) err(`guidgate reprocess: the account system at ${o.accountUrl} could not be reached for any row`);
      return code;
    }),
  );
}

export function registerReprocess(program: Command): void {
  program
    .command('reprocess')
    .description('send FAILED rows again (same GUID, stored bytes) while attempts < --max-attempts; never touches any other state')
    .addOption(accountUrlFlag())
    .addOption(flag('--max-attempts <n>', 'sends of one GUID at most (refused connections count)').argParser(intArg(1)).default(5))
    .addOption(limitFlag())
    .addOption(dryRunFlag('list the candidates; send and change nothing'))
    .addOption(concurrencyFlag('sends in flight at once'))
    .addOption(flag('--timeout <duration>', 'timeout of one account call').argParser(durationArg).default(3000, '3s'))
    .addOption(dbFlag())
    .addOption(jsonFlag())
    .action(async (o: ReprocessCliOptions) => {
      setExit(await runReprocess(o));
    });
}
