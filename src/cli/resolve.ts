import type { Command } from 'commander';
import type { ResolveSummary } from '../commands/resolve.js';
import { formatDuration } from '../shared/duration.js';
import { inquiryRateFlag, minAgeFlag, accountUrlFlag, concurrencyFlag, continuityDirFlag, dbFlag, dryRunFlag, graceFlag, jsonFlag, limitFlag, timeoutFlag } from './options.js';
import { age, iso, setExit, type Exit } from './output.js';
import { runRowCommand, type RowCliOptions } from './rowRun.js';
import { warnUnderFloor } from './warnings.js';

export interface ResolveCliOptions extends RowCliOptions { minAge: number; grace: number }

/** `2 UNKNOWN rows are younger than min-age 10m, left out: the first becomes eligible at … (in 9m 58s)`, or nothing. */
function tooYoungLine(young: ResolveSummary['tooYoung'], minAgeMs: number): string[] {
  if (young === undefined || young.count === 0 || young.firstEligibleAt === null || young.firstEligibleInMs === null) return [];
  const rows = young.count === 1 ? '1 UNKNOWN row is' : `${young.count} UNKNOWN rows are`;
  return [`${rows} younger than min-age ${formatDuration(minAgeMs)}, left out: the first becomes eligible at ${iso(young.firstEligibleAt)} (in ${age(young.firstEligibleInMs)})`];
}

const tooYoungCount = (s: ResolveSummary): string => (s.tooYoung === undefined ? '' : ` too-young=${s.tooYoung.count}`);

export async function runResolve(o: ResolveCliOptions): Promise<Exit> {
  const { resolveExitCode, resolveUnknown } = await import('../commands/resolve.js');
  warnUnderFloor('resolve', 'minAge', o.minAge);
  return runRowCommand(o, {
    name: 'resolve',
    failures: ['unreachable', 'still-unknown', 'ledger-error'],
    failureLabel: 'first inquiry failure',
    run: (deps, hooks) => resolveUnknown(deps, { minAgeMs: o.minAge, graceMs: o.grace, limit: o.limit, concurrency: o.concurrency, ...hooks }),
    exitCode: resolveExitCode,
    summaryLine: (s) =>
      `resolve: candidates=${s.candidates} processed=${s.processed} absent=${s.absent} still-unknown=${s.stillUnknown} ` +
      `unreachable=${s.unreachable} skipped=${s.skipped} ledger-errors=${s.ledgerErrors} ` +
      `swept-never-sent=${s.swept.neverSent} swept-orphaned=${s.swept.orphaned} min-age=${formatDuration(o.minAge)}${tooYoungCount(s)}`,
    dryRunLine: (s) =>
      `resolve (dry run, nothing changed, nothing inquired): candidates=${s.candidates} would-sweep-never-sent=${s.swept.neverSent} would-sweep-orphaned=${s.swept.orphaned} min-age=${formatDuration(o.minAge)}${tooYoungCount(s)}`,
    notes: (s) => tooYoungLine(s.tooYoung, o.minAge),
  });
}

export function registerResolve(program: Command): void {
  program
    .command('resolve')
    .description('sweep orphans, then settle UNKNOWN rows whose last send is at least --min-age old by asking the account system')
    .addOption(accountUrlFlag())
    .addOption(minAgeFlag('only rows whose last Sent is at least this old (longer than the account system may take to process)'))
    .addOption(limitFlag())
    .addOption(dryRunFlag('list the candidates; sweep, inquire and change nothing'))
    .addOption(inquiryRateFlag('inquiries this run makes at most (50/s, 600/m; 0: no cap): over it each waits its turn, the oldest row first'))
    .addOption(concurrencyFlag('inquiries in flight at once'))
    .addOption(graceFlag("grace of the orphan sweep run first (as serve's --grace)"))
    .addOption(timeoutFlag('deadline of one inquiry'))
    .addOption(dbFlag())
    .addOption(continuityDirFlag())
    .addOption(jsonFlag())
    .action(async (o: ResolveCliOptions) => {
      setExit(await runResolve(o));
    });
}
