/**
 * Claims (Claimed + Sent) per second on PostgreSQL, one in flight and with group commit (N in flight),
 * beside the SQLite store (synchronous=FULL, writer thread as `serve` runs it) measured in the same run.
 * Usage: node dist/bench/pgAppendBench.js [--url postgres://postgres@127.0.0.1:5432/postgres] [--seconds 3] [--inflight 50] [--json]
 * The URL names a server and a database to connect to first; the bench creates its own database there and drops it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from './benchArgs.js';
import { openSqliteStore } from '../src/store/sqlite/sqliteStore.js';
import { openPostgresStore } from '../src/store/postgres/postgresStore.js';
import { claimsPerSecond } from './claimRate.js';
import { throwawayDatabase } from './throwawayDatabase.js';
import { ledgerProjection } from '../src/projections/ledgerProjection.js';

const { values } = benchArgs({
  run: 'node dist/bench/pgAppendBench.js',
  about: 'Claims (Claimed + Sent) per second on PostgreSQL, one in flight and with group commit, beside the SQLite store measured in the same run. It makes its own database on the server --url names, and drops it.',
  options: {
    url: { type: 'string', default: process.env['GUIDGATE_TEST_PG'] ?? 'postgres://postgres@127.0.0.1:5432/postgres', value: 'postgres://…', help: 'a server and a database to connect to first (GUIDGATE_TEST_PG)' },
    seconds: { type: 'string', default: '3', value: 'N', help: 'seconds per measurement' },
    inflight: { type: 'string', default: '50', value: 'N', help: 'claims in flight at once for group commit' },
    json: { type: 'boolean', default: false, help: 'print the results as JSON' },
  },
});
const seconds = Number(values.seconds);
const inflight = Number(values.inflight);

async function postgres(concurrency: number): Promise<number> {
  const database = await throwawayDatabase(values.url, 'bench');
  try {
    const store = await openPostgresStore({ projection: ledgerProjection, url: database.url });
    const rate = await claimsPerSecond(store, concurrency, seconds);
    await store.close();
    return rate;
  } finally {
    await database.drop();
  }
}

async function sqlite(concurrency: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'guidgate-bench-'));
  try {
    const store = openSqliteStore({ projection: ledgerProjection, path: join(dir, 'b.db'), synchronous: 'FULL', writer: 'thread' });
    const rate = await claimsPerSecond(store, concurrency, seconds);
    await store.close();
    return rate;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const rows: Array<{ store: string; inflight: number; claimsPerSec: number }> = [];
// Alternating, so drift on a shared machine hits both stores.
for (const c of [1, inflight]) {
  rows.push({ store: 'sqlite FULL', inflight: c, claimsPerSec: Math.round(await sqlite(c)) });
  rows.push({ store: 'postgres', inflight: c, claimsPerSec: Math.round(await postgres(c)) });
}
if (values.json) {
  process.stdout.write(JSON.stringify(rows, null, 2) + '\n');
} else {
  process.stdout.write('claims (Claimed+Sent) per second, each durable before it resolves; ratio PostgreSQL / SQLite at the same in-flight\n');
  process.stdout.write('store        in-flight  claims/s  ratio\n');
  for (const r of rows) {
    const sqliteRate = rows.find((s) => s.store === 'sqlite FULL' && s.inflight === r.inflight)!.claimsPerSec;
    process.stdout.write(`${r.store.padEnd(11)}  ${String(r.inflight).padStart(9)}  ${String(r.claimsPerSec).padStart(8)}  ${(r.claimsPerSec / sqliteRate).toFixed(2)}x\n`);
  }
}
