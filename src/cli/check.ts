import type { Command } from 'commander';
import { dbFlag, flag } from './options.js';

/** `guidgate check [--db P] [--json]`: exit 0 when the ledger is sound, 1 when not. */
export function registerCheckCommand(program: Command): void {
  program
    .command('check')
    .description('check that the ledger file is a sound guidgate ledger: SQLite header, schema, tables, then PRAGMA quick_check over every page (reads only; takes a while on a big file)')
    .addOption(dbFlag())
    .addOption(flag('--json', 'print the result as JSON'))
    .action(async (o: { db: string; json?: boolean }) => {
      const { checkLedger } = await import('../store/openStore.js');
      const r = checkLedger(o.db);
      if (o.json) process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
      else if (r.ok) process.stdout.write(`ok: ${r.path} is a sound guidgate ledger (quick_check ${r.quickCheckMs} ms)\n`);
      else process.stdout.write(`not ok: ${r.path}\n${r.problems.map((p) => `  ${p}\n`).join('')}`);
      process.exitCode = r.ok ? 0 : 1;
    });
}
