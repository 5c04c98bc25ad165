import type { Command } from 'commander';
import { dbFlag, flag } from './options.js';
import { out, printJson } from './output.js';

/** Differences named on a PostgreSQL check before it says how many more (as SQLite's quick_check lines). */
const MAX_PROBLEMS = 20;

/**
 * `guidgate check` on PostgreSQL: what can be checked from a client, said as such. The schema (`checkPostgresSchema`:
 * the version and the tables, read only), then `rebuild --verify`'s check: the `ledger` projection against a fold of
 * the event log. Pages are the server's to check (amcheck): SQLite's quick_check has no counterpart here.
 */
async function checkPostgres(db: string): Promise<{ ok: boolean; lines: string[]; json: Record<string, unknown> }> {
  const { checkPostgresSchema } = await import('../store/postgres/checkSchema.js');
  const { openStore, processActor, shownDb } = await import('../store/openStore.js');
  const { orThrow } = await import('../events/storeResult.js');
  const { verifyLedger } = await import('../commands/rebuild.js');
  const shown = shownDb(db);
  const schema = await checkPostgresSchema(db);
  const base = { path: shown, store: 'postgresql', schemaVersion: schema.schemaVersion, expectedSchemaVersion: schema.expectedVersion, tables: schema.tables };
  if (!schema.ok) {
    return { ok: false, lines: [`not ok: ${shown} (PostgreSQL)`, ...schema.problems.map((p) => `  ${p}`)], json: { ...base, ok: false, problems: schema.problems } };
  }
  const started = performance.now();
  let rows: number;
  let problems: string[];
  try {
    const store = await openStore(db, { create: false, actor: processActor('check') });
    try {
      rows = await orThrow(store.countLedger({}));
      const diffs = await orThrow(verifyLedger(store));
      problems = diffs.slice(0, MAX_PROBLEMS).map((d) => `${d.guid}  ${d.kind}${d.columns.length === 0 ? '' : `  ${d.columns.join(', ')}`} (the ledger row differs from the log: guidgate rebuild repairs it)`);
      if (diffs.length > MAX_PROBLEMS) problems.push(`…${diffs.length - MAX_PROBLEMS} more differences (guidgate rebuild --verify lists them)`);
    } finally {
      await store.close();
    }
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    return { ok: false, lines: [`not ok: ${shown} (PostgreSQL)`, `  ${why}`], json: { ...base, ok: false, problems: [why] } };
  }
  const verifyMs = Math.round(performance.now() - started);
  const checked = [
    `schema version ${schema.schemaVersion} (this guidgate's), tables ${schema.tables.join(', ')}`,
    `the ledger projection against a fold of the event log, as rebuild --verify: ${rows} rows, ${problems.length === 0 ? 'no difference' : 'differences'} (${verifyMs} ms)`,
    'pages: not checked from here (PRAGMA quick_check is SQLite\'s; on PostgreSQL, the server\'s amcheck)',
  ];
  const ok = problems.length === 0;
  const lines = ok
    ? [`ok: ${shown} is a sound guidgate ledger on PostgreSQL; checked:`, ...checked.map((c) => `  ${c}`)]
    : [`not ok: ${shown} (PostgreSQL)`, ...problems.map((p) => `  ${p}`)];
  return { ok, lines, json: { ...base, ok, problems, rows, verifyMs, checked } };
}

/** `guidgate check [--db P] [--json]`: exit 0 when the ledger is sound, 1 when not. */
export function registerCheckCommand(program: Command): void {
  program
    .command('check')
    .description('check that the ledger is a sound guidgate ledger. A file: SQLite header, schema, tables, then PRAGMA quick_check over every page (reads only; takes a while on a big file). PostgreSQL: the schema version and tables, then the projection against the log (as rebuild --verify)')
    .addOption(dbFlag())
    .addOption(flag('--json', 'print the result as JSON'))
    .action(async (o: { db: string; json?: boolean }) => {
      const { checkLedger } = await import('../store/openStore.js');
      const { isPostgresUrl } = await import('../store/postgres/postgresStore.js');
      if (isPostgresUrl(o.db)) {
        const r = await checkPostgres(o.db);
        if (o.json) printJson(r.json);
        else for (const line of r.lines) out(line);
        process.exitCode = r.ok ? 0 : 1;
        return;
      }
      const r = checkLedger(o.db);
      if (o.json) process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
      else if (r.ok) process.stdout.write(`ok: ${r.path} is a sound guidgate ledger (quick_check ${r.quickCheckMs} ms)\n`);
      else process.stdout.write(`not ok: ${r.path}\n${r.problems.map((p) => `  ${p}\n`).join('')}`);
      process.exitCode = r.ok ? 0 : 1;
    });
}
