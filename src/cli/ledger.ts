import type { Command } from 'commander';
import { orThrow } from '../events/storeResult.js';
import { STATUSES, type Status } from '../events/codecs.js';
import { choiceArg, dbFlag, durationArg, flag, jsonFlag, limitFlag, statusesArg } from './options.js';
import { age, err, iso, out, setExit, toJson, type Exit } from './output.js';
import { withLedger } from './withLedger.js';

export type LedgerSort = 'guid' | 'updated';

export interface LedgerCliOptions { db: string; status?: Status[]; olderThan?: number; limit?: number; sort?: LedgerSort; json?: boolean }

/**
 * `guidgate ledger`: the rows as the operator API shows them (`operatorRow`: never the request, the answer nor the
 * fingerprint), in GUID order or newest change first. With `--limit`, one row more is read to say whether the output
 * was cut: on the table's last line, or on stderr beside `--json`'s array.
 */
export function runLedger(o: LedgerCliOptions): Promise<Exit> {
  return withLedger('ledger', o.db, async (store) => {
    const { listLedger } = await import('../commands/ledger.js');
    const { operatorRow } = await import('../events/policy.js');
    // Ages and --older-than by the ledger's clock, as the commands that act on them judge them.
    const now = await orThrow(store.now());
    const rows = listLedger(store, { statuses: o.status, olderThanMs: o.olderThan, limit: o.limit === undefined ? undefined : o.limit + 1, order: o.sort, clock: () => now });
    const counts = new Map<string, number>();
    let n = 0;
    let more = false;
    if (o.json) process.stdout.write('[');
    else out(`${'GUID'.padEnd(28)}  ${'STATUS'.padEnd(8)}  ${'CODE'.padEnd(4)}  ATT  ${'CREATED'.padEnd(24)}  ${'UPDATED'.padEnd(24)}  AGE`);
    for await (const row of rows) {
      if (o.limit !== undefined && n === o.limit) {
        more = true;
        break;
      }
      counts.set(row.status, (counts.get(row.status) ?? 0) + 1);
      if (o.json) process.stdout.write(`${n === 0 ? '\n' : ',\n'}  ${toJson(operatorRow(row))}`);
      else out(`${row.guid.padEnd(28)}  ${row.status.padEnd(8)}  ${(row.code ?? '-').padEnd(4)}  ${String(row.attempts).padStart(3)}  ${iso(row.createdAt)}  ${iso(row.updatedAt)}  ${age(now - row.updatedAt)}`);
      n++;
    }
    const cut = more ? `cut at --limit ${o.limit}: more rows match (raise --limit, or narrow with --status or --older-than)` : '';
    const order = o.sort === 'updated' ? 'newest change first' : 'by GUID';
    if (o.json) {
      process.stdout.write(n === 0 ? ']\n' : '\n]\n');
      if (more) err(`guidgate ledger: ${n} rows shown, ${cut}`);
    } else {
      out(`${n} rows${n === 0 ? '' : ` (${[...counts].map(([s, c]) => `${s} ${c}`).join(', ')})`}, ${order}${more ? `; ${cut}` : ''}`);
    }
    return 0;
  });
}

export function registerLedger(program: Command): void {
  program
    .command('ledger')
    .description('list ledger rows (never the raw request, the answer nor the fingerprint)')
    .addOption(flag('--status <status>', `only these statuses: ${STATUSES.join(', ')} (comma-separated)`).argParser(statusesArg))
    .addOption(flag('--older-than <duration>', 'only rows whose last change is older than this').argParser(durationArg))
    .addOption(flag('--sort <order>', 'guid (GUID order) or updated (the last change, newest first)').argParser(choiceArg<LedgerSort>(['guid', 'updated'])).default('guid'))
    .addOption(limitFlag('show at most this many rows (the last line says when more match)'))
    .addOption(dbFlag())
    .addOption(jsonFlag('print a JSON array of rows, as the operator API shows them'))
    .action(async (o: LedgerCliOptions) => {
      setExit(await runLedger(o));
    });
}
