/**
 * Appends per second for a claim (Claimed + Sent), at synchronous=FULL and NORMAL, one claim per
 * transaction (sequential) and with group commit (N claims in flight sharing transactions).
 * Usage: node dist/bench/appendBench.js [--seconds 3] [--inflight 50] [--json]
 * Prints ratios against the FULL/sequential baseline measured in the same run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from './benchArgs.js';
import { openSqliteStore, type Synchronous } from '../src/store/sqlite/sqliteStore.js';
import { claimsPerSecond } from './claimRate.js';
import { ledgerProjection } from '../src/projections/ledgerProjection.js';

const { values } = benchArgs({
  run: 'node dist/bench/appendBench.js',
  about: 'Claims (Claimed + Sent) per second at synchronous=FULL and NORMAL, one in flight and with group commit; ratios against FULL, one in flight, measured in the same run.',
  options: {
    seconds: { type: 'string', default: '3', value: 'N', help: 'seconds per measurement' },
    inflight: { type: 'string', default: '50', value: 'N', help: 'claims in flight at once for group commit' },
    json: { type: 'boolean', default: false, help: 'print the results as JSON' },
  },
});
const seconds = Number(values.seconds);
const inflight = Number(values.inflight);

async function measure(synchronous: Synchronous, concurrency: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'guidgate-bench-'));
  const store = openSqliteStore({ projection: ledgerProjection, path: join(dir, 'b.db'), synchronous });
  const rate = await claimsPerSecond(store, concurrency, seconds);
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  return rate;
}

const rows: Array<{ synchronous: Synchronous; inflight: number; claimsPerSec: number; ratio: number }> = [];
let baseline = 0;
for (const synchronous of ['FULL', 'NORMAL'] as const) {
  for (const c of [1, inflight]) {
    const rate = await measure(synchronous, c);
    if (baseline === 0) baseline = rate;
    rows.push({ synchronous, inflight: c, claimsPerSec: Math.round(rate), ratio: Number((rate / baseline).toFixed(2)) });
  }
}
if (values.json) {
  process.stdout.write(JSON.stringify(rows, null, 2) + '\n');
} else {
  process.stdout.write('claims (Claimed+Sent) per second; ratio vs FULL with one claim in flight\n');
  process.stdout.write('synchronous  in-flight  claims/s  ratio\n');
  for (const r of rows) process.stdout.write(`${r.synchronous.padEnd(11)}  ${String(r.inflight).padStart(9)}  ${String(r.claimsPerSec).padStart(8)}  ${r.ratio.toFixed(2)}x\n`);
}
