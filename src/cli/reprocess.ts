import { InvalidArgumentError, type Command } from 'commander';
import { GUID_PATTERN } from '../contract/transferRequest.js';
import { minAgeFlag, accountUrlFlag, concurrencyFlag, dbFlag, dryRunFlag, graceFlag, jsonFlag, limitFlag, maxAttemptsFlag, timeoutFlag } from './options.js';
import { err, setExit, toJson, type Exit } from './output.js';
import { sendWindowMs } from '../settle/sendWindow.js';
import { runRowCommand, type RowCliOptions } from './rowRun.js';

export interface ReprocessCliOptions extends RowCliOptions {
  maxAttempts: number; minAge: number; grace: number;
  /** `reprocess GUID…`: only these rows (none given: every FAILED row under the cap). */
  guids?: readonly string[] | undefined;
}

/** A GUID named on the command line: one the contract's pattern allows, else bad usage naming it. */
function guidArg(value: string, previous: string[] | undefined): string[] {
  if (!GUID_PATTERN.test(value)) throw new InvalidArgumentError(`'${value}' is not a GUID (${GUID_PATTERN.source})`);
  return [...(previous ?? []), value];
}

/** A withheld send or a stale answer, on stderr beside the summary: `guidgate reprocess: MESSAGE {fields}`. */
const stderrSendLog = {
  warn: (line: Record<string, unknown>, message: string) => err(`guidgate reprocess: ${message} ${toJson(line)}`),
  error: (line: Record<string, unknown>, message: string) => err(`guidgate reprocess: ${message} ${toJson(line)}`),
};

export async function runReprocess(o: ReprocessCliOptions): Promise<Exit> {
  const { reprocessExitCode, reprocessFailed } = await import('../settle/reprocess.js');
  return runRowCommand(o, {
    name: 'reprocess',
    claimDeadlineMs: sendWindowMs(o.grace),
    failures: ['failed', 'unknown', 'withheld', 'ledger-error'],
    failureLabel: 'first failed send',
    run: async (deps, hooks) => {
      const guids = o.guids === undefined || o.guids.length === 0 ? undefined : o.guids;
      const summary = await reprocessFailed({ ...deps, sendLog: stderrSendLog }, { maxAttempts: o.maxAttempts, timeoutMs: o.timeout, graceMs: o.grace, minAgeMs: o.minAge, limit: o.limit, concurrency: o.concurrency, guids, ...hooks });
      for (const { guid, why } of summary.notTaken ?? []) err(`guidgate reprocess: ${guid} not taken: ${why}`);
      return summary;
    },
    exitCode: reprocessExitCode,
    summaryLine: (s) => `reprocess: candidates=${s.candidates} done=${s.done} failed=${s.failed} unknown=${s.unknown} skipped=${s.skipped} found=${s.found} held=${s.held} withheld=${s.withheld} ledger-errors=${s.ledgerErrors}`,
    dryRunLine: (s) => `reprocess (dry run, nothing changed, nothing sent): candidates=${s.candidates} max-attempts=${o.maxAttempts}`,
  });
}

export function registerReprocess(program: Command): void {
  program
    .command('reprocess')
    .description('send FAILED rows again (same GUID, stored bytes) while attempts < --max-attempts; never touches any other state')
    .argument('[guid...]', 'only these GUIDs (a dead letter: with --max-attempts above its attempts); none: every FAILED row under the cap', guidArg)
    .addOption(accountUrlFlag())
    .addOption(maxAttemptsFlag('sends of one GUID at most (refused connections count)'))
    .addOption(minAgeFlag('a row FAILED by an inquiry is sent again only when its last Sent is this old and a fresh inquiry says absent'))
    .addOption(limitFlag())
    .addOption(dryRunFlag('list the candidates; send and change nothing'))
    .addOption(concurrencyFlag('sends in flight at once'))
    .addOption(timeoutFlag('timeout of one account call'))
    .addOption(graceFlag("as serve's --grace: a row is sent only if its claim commits within half of it"))
    .addOption(dbFlag())
    .addOption(jsonFlag())
    .action(async (guids: string[] | undefined, o: ReprocessCliOptions) => {
      setExit(await runReprocess({ ...o, guids }));
    });
}
