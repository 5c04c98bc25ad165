import type { Command } from 'commander';
import { orThrow } from '../events/storeResult.js';
import { STATUSES, type Status } from '../events/codecs.js';
import { dbFlag, durationArg, flag, jsonFlag, limitFlag, statusesArg } from './options.js';
import { age, iso, out, setExit, toJson, type Exit } from './output.js';
import { withLedger } from './withLedger.js';

export function runLedger(o: { db: string; status?: Status[]; olderThan?: number; limit?: number; json?: boolean }): Promise<Exit> {
  return withLedger('ledger', o.db, async (store) => {
    const { listLedger } = await import('../settle/ledger.js');
    const { ledgerView } = await import('../events/policy.js');
    // Ages and --older-than by the ledger's clock, as the commands that act on them judge them.
    const now = await orThrow(store.now());
    const rows = listLedger(store, { statuses: o.status, olderThanMs: o.olderThan, limit: o.limit, clock: () => now });
    const counts = new Map<string, number>();
    let n = 0;
    if (o.json) process.stdout.write('[');
    else out(`${'GUID'.padEnd(28)}  ${'STATUS'.padEnd(8)}  ${'CODE'.padEnd(4)}  ATT  ${'CREATED'.padEnd(24)}  ${'UPDATED'.padEnd(24)}  AGE`);
    for await (const row of rows) {
      counts.set(row.status, (counts.get(row.status) ?? 0) + 1);
      if (o.json) process.stdout.write(`${n === 0 ? '\n' : ',\n'}  ${toJson(ledgerView(row))}`);
      else out(`${row.guid.padEnd(28)}  ${row.status.padEnd(8)}  ${(row.code ?? '-').padEnd(4)}  ${String(row.attempts).padStart(3)}  ${iso(row.createdAt)}  ${iso(row.updatedAt)}  ${age(now - row.updatedAt)}`);
      n++;
    }
    if (o.json) process.stdout.write(n === 0 ? ']\n' : '\n]\n');
    else out(`${n} rows${n === 0 ? '' : ` (${[...counts].map(([s, c]) => `${s} ${c}`).join(', ')})`}`);
    return 0;
  });
}

export function registerLedger(program: Command): void {
  program
    .command('ledger')
    .description('list ledger rows (never the raw request)')
    .addOption(flag('--status <status>', `only these statuses: ${STATUSES.join(', ')} (comma-separated)`).argParser(statusesArg))
    .addOption(flag('--older-than <duration>', 'only rows whose last change is older than this').argParser(durationArg))
    .addOption(limitFlag())
    .addOption(dbFlag())
    .addOption(jsonFlag('print a JSON array of rows'))
    .action(async (o: { status?: Status[]; olderThan?: number; limit?: number; db: string; json?: boolean }) => {
      setExit(await runLedger(o));
    });
}
