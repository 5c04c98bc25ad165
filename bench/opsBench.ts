/**
 * Rows per second of the operator commands over a big ledger: resolve, reprocess and purge, one after the other
 * on the same rows. The rows are seeded through the store (Claimed+Sent, then TimedOut: UNKNOWN), with a clock
 * 30 days back so that they are old enough for every command; the bundled simulator (its own process, answering
 * at once) has never seen them, so resolve finds every one absent (→ FAILED), reprocess sends every one
 * (→ DONE, still stamped 30 days back), purge makes every one a tombstone, and a purge "91 days later"
 * deletes the tombstones and gives the space back.
 *
 * Usage: node dist/bench/opsBench.js [--rows 100000] [--concurrency 8] [--writer thread|inline] [--json]
 * (`inline`, the default, is what the commands use; `thread` runs commits on a writer thread, as `serve` does.)
 */
import { startListening } from './listening.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchArgs } from './benchArgs.js';
import { orThrow } from '../src/events/storeResult.js';
import { openSqliteStore, type SqliteEventStore } from '../src/store/sqlite/sqliteStore.js';
import { createAccountClient } from '../src/account/accountClient.js';
import { purgeDone } from '../src/commands/purge.js';
import { reprocessFailed } from '../src/commands/reprocess.js';
import { resolveUnknown } from '../src/commands/resolve.js';
import { ledgerProjection } from '../src/projections/ledgerProjection.js';

const { values } = benchArgs({
  run: 'node dist/bench/opsBench.js',
  about: 'Rows per second of resolve, reprocess and purge over a big ledger (the rows seeded 30 days back), one after the other on the same rows.',
  options: {
    rows: { type: 'string', default: '100000', value: 'N', help: 'rows to seed' },
    concurrency: { type: 'string', default: '8', value: 'N', help: 'calls in flight at once' },
    writer: { type: 'string', default: 'inline', value: 'inline|thread', help: 'inline: as the commands commit; thread: on a writer thread, as --writer thread' },
    json: { type: 'boolean', default: false, help: 'print the results as JSON' },
  },
});
const rows = Number(values.rows);
const concurrency = Number(values.concurrency);
const writer = values.writer === 'thread' ? 'thread' : 'inline';
const DAY = 86_400_000;
const CHUNK = 1000;

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'guidgate');

/** The bundled simulator in its own process (so it does not share this event loop); resolves to its URL. */
async function startSimulatorProcess(): Promise<{ url: string; stop: () => Promise<void> }> {
  const { child, listening } = startListening([BIN, 'simulator', '--port', '0']);
  return {
    url: await listening,
    stop: () => new Promise<void>((r) => {
      child.once('exit', () => r());
      child.kill('SIGTERM');
    }),
  };
}

async function seed(store: SqliteEventStore): Promise<number> {
  const t0 = performance.now();
  for (let start = 0; start < rows; start += CHUNK) {
    const guids = Array.from({ length: Math.min(CHUNK, rows - start) }, (_, i) => `BENCH-${String(start + i).padStart(7, '0')}`);
    const claims = await Promise.all(guids.map((guid) =>
      orThrow(store.execute(guid, {
        type: 'Submit',
        request: JSON.stringify({ guid, from: 'ACC-6222021001', to: 'ACC-6222021002', amount: 100, currency: 'CNY' }),
        fingerprint: guid,
        timeoutMs: 3000,
        maxAttempts: 5,
      }))));
    if (claims.some((c) => c.kind !== 'applied')) throw new Error('seed claim refused');
    const timeouts = await Promise.all(guids.map((guid) => orThrow(store.execute(guid, { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }))));
    if (timeouts.some((c) => c.kind !== 'applied')) throw new Error('seed timeout refused');
  }
  return (performance.now() - t0) / 1000;
}

interface Row { readonly phase: string; readonly rows: number; readonly seconds: number; readonly rowsPerSec: number; readonly result: string }

const dir = mkdtempSync(join(tmpdir(), 'guidgate-opsbench-'));
const db = join(dir, 'ledger.db');
const sim = await startSimulatorProcess();
const results: Row[] = [];
const row = (phase: string, n: number, seconds: number, result: string): void => {
  results.push({ phase, rows: n, seconds: Number(seconds.toFixed(2)), rowsPerSec: Math.round(n / seconds), result });
};
try {
  // Everything the seed and the first two commands append is stamped 30 days ago.
  const past = openSqliteStore({ projection: ledgerProjection, path: db, clock: () => Date.now() - 30 * DAY, writer });
  const seedSeconds = await seed(past);
  row('seed (Claimed+Sent, TimedOut)', rows, seedSeconds, `${rows} UNKNOWN`);

  const account = createAccountClient({ baseUrl: sim.url, timeoutMs: 3000, connections: concurrency });
  let t0 = performance.now();
  const resolved = await resolveUnknown({ store: past, account }, { minAgeMs: 60_000, graceMs: 5000, concurrency });
  row(`resolve (concurrency ${concurrency})`, resolved.candidates, (performance.now() - t0) / 1000,
    `absent ${resolved.absent}, processed ${resolved.processed}, unknown ${resolved.stillUnknown}`);

  t0 = performance.now();
  const reprocessed = await reprocessFailed({ store: past, account }, { maxAttempts: 5, timeoutMs: 3000, concurrency });
  row(`reprocess (concurrency ${concurrency})`, reprocessed.candidates, (performance.now() - t0) / 1000,
    `done ${reprocessed.done}, failed ${reprocessed.failed}, unknown ${reprocessed.unknown}, skipped ${reprocessed.skipped}`);
  await account.close();
  await past.close();

  const store = openSqliteStore({ projection: ledgerProjection, path: db, writer });
  t0 = performance.now();
  const purged = await purgeDone({ store }, { retentionMs: 7 * DAY, tombstoneRetentionMs: 90 * DAY });
  row('purge (retention 7d, incl. vacuum)', purged.candidates, (performance.now() - t0) / 1000,
    `purged ${purged.purged}, ${(purged.bytesBefore / 1e6).toFixed(1)} MB → ${(purged.bytesAfter / 1e6).toFixed(1)} MB`);

  // 90 days on: the tombstones go, with their events, and the file shrinks.
  t0 = performance.now();
  const later = await purgeDone({ store, clock: () => Date.now() + 91 * DAY }, { retentionMs: 7 * DAY, tombstoneRetentionMs: 90 * DAY });
  row('purge 91 days later (tombstones)', later.tombstonesRemoved, (performance.now() - t0) / 1000,
    `removed ${later.tombstonesRemoved}, ${(later.bytesBefore / 1e6).toFixed(1)} MB → ${(later.bytesAfter / 1e6).toFixed(1)} MB`);
  await store.close();
} finally {
  await sim.stop();
  rmSync(dir, { recursive: true, force: true });
}

if (values.json) {
  process.stdout.write(JSON.stringify(results, null, 2) + '\n');
} else {
  process.stdout.write(`operator commands over ${rows} rows (SQLite synchronous=FULL, ${writer} writer, simulator answering at once, ${concurrency} calls in flight)\n`);
  const w = Math.max(...results.map((r) => r.phase.length));
  process.stdout.write(`${'phase'.padEnd(w)}  ${'rows'.padStart(7)}  ${'seconds'.padStart(7)}  ${'rows/s'.padStart(7)}  result\n`);
  for (const r of results) {
    process.stdout.write(`${r.phase.padEnd(w)}  ${String(r.rows).padStart(7)}  ${r.seconds.toFixed(2).padStart(7)}  ${String(r.rowsPerSec).padStart(7)}  ${r.result}\n`);
  }
}
