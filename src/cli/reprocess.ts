import type { EventStore } from '../events/store.js';
import * as E from 'fp-ts/lib/Either.js';
import { InvalidArgumentError, type Command } from 'commander';
import { GUID_PATTERN } from '../contract/transferRequest.js';
import { inquiryRateFlag, minAgeFlag, accountUrlFlag, concurrencyFlag, continuityDirFlag, dbFlag, dryRunFlag, graceFlag, jsonFlag, limitFlag, maxAttemptsFlag, timeoutFlag } from './options.js';
import { age, err, iso, setExit, toJson, type Exit } from './output.js';
import type { HeldReason } from '../events/policy.js';
import type { RefusalReason } from '../events/decide.js';
import type { LedgerState } from '../events/state.js';
import { formatDuration } from '../shared/duration.js';
import { sendWindowMs } from '../send/sendWindow.js';
import { runRowCommand, type RowCliOptions } from './rowRun.js';
import { warnUnderFloor } from './warnings.js';

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
  const { reprocessExitCode, reprocessFailed } = await import('../commands/reprocess.js');
  const { heldWhy, isHeld } = await import('../events/policy.js');
  warnUnderFloor('reprocess', 'minAge', o.minAge);
  return runRowCommand(o, {
    name: 'reprocess',
    claimDeadlineMs: sendWindowMs(o.grace),
    failures: ['failed', 'unknown', 'withheld', 'ledger-error'],
    failureLabel: 'first failed send',
    run: async (deps, hooks) => {
      const guids = o.guids === undefined || o.guids.length === 0 ? undefined : o.guids;
      const continuityWindow = await openWindowOf(deps.store);
      const summary = await reprocessFailed({ ...deps, sendLog: stderrSendLog }, { maxAttempts: o.maxAttempts, timeoutMs: o.timeout, graceMs: o.grace, minAgeMs: o.minAge, limit: o.limit, concurrency: o.concurrency, guids, continuityWindow, ...hooks });
      for (const { guid, why } of summary.notTaken ?? []) err(`guidgate reprocess: ${guid} not taken: ${why}`);
      return summary;
    },
    exitCode: reprocessExitCode,
    summaryLine: (s) => `reprocess: candidates=${s.candidates} done=${s.done} failed=${s.failed} unknown=${s.unknown} skipped=${s.skipped} found=${s.found} held=${s.held} withheld=${s.withheld} ledger-errors=${s.ledgerErrors}`,
    dryRunLine: (s) => `reprocess (dry run, nothing changed, nothing sent): candidates=${s.candidates} max-attempts=${o.maxAttempts}`,
    explain: (row, outcome, detail, now) => (outcome === 'held' && detail !== undefined && isHeld(detail as RefusalReason) ? heldLine(row, heldWhy(detail as HeldReason), detail === 'too-young', o.minAge, now) : undefined),
  });
}

/**
 * A held row in words: why it was not sent (the words of the channel's E901) and when: the time its last Sent becomes
 * old enough to ask about, or the last Sent itself when the inquiry could not tell.
 */
function heldLine(row: LedgerState, why: string, tooYoung: boolean, minAgeMs: number, now: number): string {
  const sent = row.sentAt ?? row.updatedAt;
  if (!tooYoung) return `held, ${why} (last Sent ${iso(sent)}); not sent again: run reprocess again later`;
  const eligible = sent + minAgeMs;
  return `held, ${why}: its last Sent (${iso(sent)}) is younger than min-age ${formatDuration(minAgeMs)}; it may be asked about at ${iso(eligible)} (in ${age(eligible - now)})`;
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
    .addOption(inquiryRateFlag('inquiries before a resend this run makes at most (50/s, 600/m; 0: no cap): over it each waits its turn, the oldest row first'))
    .addOption(concurrencyFlag('sends in flight at once'))
    .addOption(timeoutFlag('timeout of one account call'))
    .addOption(graceFlag("as serve's --grace: a row is sent only if its claim commits within half of it"))
    .addOption(dbFlag())
    .addOption(continuityDirFlag())
    .addOption(jsonFlag())
    .action(async (guids: string[] | undefined, o: ReprocessCliOptions) => {
      setExit(await runReprocess({ ...o, guids }));
    });
}

/**
 * The continuity window as the mark records it (SQLite): one `serve` opened and is still open, or a `guidgate
 * restore` the next serve will open. Inside it every resend is inquired about first (CONTRACT.md §9). An unknown
 * standing (no mark) is not a window here: `serve` opens that one at its start.
 */
async function openWindowOf(store: EventStore): Promise<{ readonly wentBackAt: number } | null> {
  const [mark, now] = [await store.readMark(), await store.now()];
  if (E.isLeft(mark) || mark.right === null || E.isLeft(now)) return null;
  const { window, restored } = mark.right;
  if (window !== undefined && window.endsAt > now.right) return { wentBackAt: window.wentBackAt };
  return restored === undefined ? null : { wentBackAt: restored.at };
}
