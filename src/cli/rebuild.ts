import type { Command } from 'commander';
import { orThrow } from '../events/storeResult.js';
import { continuityDirFlag, dbFlag, flag, jsonFlag } from './options.js';
import { out, printJson, setExit, type Exit } from './output.js';
import { withLedger } from './withLedger.js';

export function runRebuild(o: { db: string; verify?: boolean; json?: boolean; continuityDir?: string }): Promise<Exit> {
  return withLedger('rebuild', o.db, async (store) => {
    const { rebuildLedger, verifyLedger } = await import('../commands/rebuild.js');
    if (o.verify !== true) {
      const { rows } = await orThrow(rebuildLedger(store));
      if (o.json) printJson({ rebuilt: true, rows });
      else out(`rebuild: the projection was rebuilt from the log: rows=${rows}`);
      return 0;
    }
    const diffs = await orThrow(verifyLedger(store));
    if (o.json) printJson({ equal: diffs.length === 0, differences: diffs });
    else {
      for (const d of diffs) {
        const cols = d.columns.map((c) => `${c}: ledger=${JSON.stringify(d.values[c]?.ledger)} log=${JSON.stringify(d.values[c]?.log)}`).join('; ');
        out(`${d.guid}  ${d.kind}${cols === '' ? '' : `  ${cols}`}`);
      }
      out(diffs.length === 0 ? 'rebuild --verify: the projection matches the log: differences=0' : `rebuild --verify: the projection differs from the log: differences=${diffs.length} (guidgate rebuild repairs it)`);
    }
    return diffs.length === 0 ? 0 : 1;
  }, { writes: o.verify !== true, continuityDir: o.continuityDir });
}

export function registerRebuild(program: Command): void {
  program
    .command('rebuild')
    .description('rebuild the ledger projection from the event log')
    .addOption(flag('--verify', 'only compare the projection with the log; exit 1 on any difference'))
    .addOption(dbFlag())
    .addOption(continuityDirFlag())
    .addOption(jsonFlag())
    .action(async (o: { verify?: boolean; db: string; json?: boolean; continuityDir?: string }) => {
      setExit(await runRebuild(o));
    });
}
