import type { Command } from 'commander';
import { formatDuration } from '../shared/duration.js';
import { continuityDirFlag, dbFlag, dryRunFlag, durationArg, flag, jsonFlag, shownDefault } from './options.js';
import { DEFAULTS } from '../shared/defaults.js';
import { err, guidsByOutcome, out, printJson, setExit, type Exit } from './output.js';
import { withLedger } from './withLedger.js';
import { warnUnderFloor } from './warnings.js';
import { interruptedExit, interruptible } from './interrupt.js';
import { startProgress } from './progress.js';

export interface PurgeCliOptions { db: string; continuityDir?: string; retention: number; tombstoneRetention: number; dryRun?: boolean; json?: boolean }

export async function runPurge(o: PurgeCliOptions): Promise<Exit> {
  const { purgeDone } = await import('../commands/purge.js');
  warnUnderFloor('purge', 'retention', o.retention);
  return withLedger('purge', o.db, async (store) => {
    const progress = startProgress('purge');
    const stop = interruptible('purge');
    const named = guidsByOutcome();
    const summary = await purgeDone({ store }, {
      retentionMs: o.retention, tombstoneRetentionMs: o.tombstoneRetention, dryRun: o.dryRun, signal: stop.signal,
      onProgress: (d, t) => progress.update(d, t),
      onRow: (row, outcome) => named.add(outcome === 'candidate' ? 'would-purge' : outcome, row.guid),
    });
    progress.stop();
    stop.dispose();
    const code = interruptedExit('purge', stop.signal, 0);
    if (o.json) printJson({ ...summary, guids: named.json(), exitCode: code });
    else if (summary.dryRun) {
      out(`purge (dry run, nothing changed): would-purge=${summary.candidates} would-remove-tombstones=${summary.tombstonesRemoved} bytes=${summary.bytesBefore} retention=${formatDuration(o.retention)} tombstone-retention=${formatDuration(o.tombstoneRetention)}`);
    } else {
      out(
        `purge: candidates=${summary.candidates} purged=${summary.purged} skipped=${summary.candidates - summary.purged} ` +
          `tombstones-removed=${summary.tombstonesRemoved} bytes-before=${summary.bytesBefore} bytes-after=${summary.bytesAfter}`,
      );
    }
    if (!o.json) for (const line of named.lines()) out(line);
    return code;
  }, { writes: o.dryRun !== true, continuityDir: o.continuityDir });
}

export function registerPurge(program: Command): void {
  program
    .command('purge')
    .description('DONE rows finished before now - retention become PURGED tombstones; old tombstones are deleted; space is given back')
    .addOption(flag('--retention <duration>', 'keep DONE rows this long after their last change').argParser(durationArg).default(DEFAULTS.retentionMs, shownDefault(DEFAULTS.retentionMs)))
    .addOption(flag('--tombstone-retention <duration>', 'keep PURGED tombstones (E905 answers) this long').argParser(durationArg).default(DEFAULTS.tombstoneRetentionMs, shownDefault(DEFAULTS.tombstoneRetentionMs)))
    .addOption(dryRunFlag('count what would be purged and removed; change nothing'))
    .addOption(dbFlag())
    .addOption(continuityDirFlag())
    .addOption(jsonFlag())
    .action(async (o: PurgeCliOptions) => {
      setExit(await runPurge(o));
    });
}
