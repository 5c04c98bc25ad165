import type { Command } from 'commander';
import { orThrow } from '../events/storeResult.js';
import { dbFlag, jsonFlag } from './options.js';
import { err, iso, out, printJson, setExit, type Exit } from './output.js';
import { withLedger } from './withLedger.js';

export function runHistory(o: { db: string; guid: string; json?: boolean }): Promise<Exit> {
  return withLedger('history', o.db, async (store) => {
    const { readHistory } = await import('../commands/history.js');
    const events = await orThrow(readHistory(store, o.guid));
    if (events.length === 0) {
      err(`guidgate history: no such GUID in the ledger: ${o.guid}`);
      return 1;
    }
    if (o.json) {
      printJson(events);
      return 0;
    }
    for (const e of events) out(`${String(e.seq).padStart(3)}  ${iso(e.at)}  ${e.type.padEnd(13)}  ${JSON.stringify(e.data)}`);
    const row = await orThrow(store.getLedger(o.guid));
    out(`${o.guid}: ${events.length} events; now ${row?.status ?? '(no ledger row)'}${row?.code == null ? '' : ` ${row.code}`}`);
    return 0;
  });
}

export function registerHistory(program: Command): void {
  program
    .command('history')
    .description("a GUID's events in order, for auditors")
    .argument('<guid>', 'the transfer GUID')
    .addOption(dbFlag())
    .addOption(jsonFlag('print an array of {seq, type, at, data}'))
    .action(async (guid: string, o: { db: string; json?: boolean }) => {
      setExit(await runHistory({ ...o, guid }));
    });
}
