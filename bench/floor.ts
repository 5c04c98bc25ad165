/**
 * `npm run bench:floor`: the CPU that SQLite needs for a transfer's rows in the contract's tables, and nothing else
 * (issue #29, "The floor"; bench/floor/floorWrites.ts): better-sqlite3, WAL, no sync, batches of 64 transfers with
 * random UUID GUIDs, each batch a claim transaction and an outcome transaction. The variants write the same rows:
 * `row` (one statement execution per row, five per transfer), `json` and `jsonb` (a batch's rows of one table as
 * one statement over `json_each` or `jsonb_each`). Runs alternate the variants (the order reversed every other round), each run on a new
 * file in this process; the figure is process CPU (user + system) per transfer over the writes alone, medians of
 * the rounds, with each variant's ratio to `row` within a round, and the bytes the process wrote per transfer (the
 * WAL's frames and the checkpoints' copies into the file, from /proc/self/io).
 *
 * Usage: node dist/bench/floor.js [--rounds 7] [--transfers 25600] [--batch 64] [--cache-kb 4000] [--variants row,json,jsonb]
 *          [--json]
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchArgs } from './benchArgs.js';
import { FLOOR_WRITERS, openFloorDb, type FloorTransfer, type FloorVariant } from './floor/floorWrites.js';

const { values } = benchArgs({
  run: 'node dist/bench/floor.js',
  about: "The CPU SQLite needs for a transfer's rows in the contract's tables and nothing else, per variant of writing them; medians of the rounds, each variant's ratio to `row`, bytes written per transfer.",
  options: {
    rounds: { type: 'string', default: '7', value: 'N', help: 'rounds (the variants alternate, the order reversed every other round)' },
    transfers: { type: 'string', default: '25600', value: 'N', help: 'transfers per run' },
    batch: { type: 'string', default: '64', value: 'N', help: 'transfers per transaction' },
    'cache-kb': { type: 'string', default: '4000', value: 'KB', help: "SQLite's page cache" },
    variants: { type: 'string', default: Object.keys(FLOOR_WRITERS).join(','), value: 'LIST', help: 'the variants to run, separated by commas' },
    json: { type: 'boolean', default: false, help: 'print the results as JSON' },
  },
});
const rounds = Number(values.rounds);
const transfers = Number(values.transfers);
const batchSize = Number(values.batch);
const cacheKb = Number(values['cache-kb']);
const VARIANTS = values.variants.split(',') as FloorVariant[];
for (const v of VARIANTS) if (!(v in FLOOR_WRITERS)) throw new Error(`--variants: unknown variant ${v} (known: ${Object.keys(FLOOR_WRITERS).join(', ')})`);
if (!VARIANTS.includes('row')) VARIANTS.unshift('row'); // the yardstick of every ratio
const dir = mkdtempSync(join(tmpdir(), 'guidgate-floor-'));

/** `n` transfers as the relay holds them (a 150-character extra field in the request, as `npm run bench` sends). */
function makeTransfers(n: number): FloorTransfer[] {
  return Array.from({ length: n }, () => {
    const guid = randomUUID();
    const request = `{"guid":"${guid}","from":"ACC-1001","to":"ACC-2002","amount":100,"currency":"CNY","note":"${'x'.repeat(150)}"}`;
    return {
      guid,
      request,
      fingerprint: createHash('sha256').update(request).digest('hex'),
      response: `{"guid":"${guid}","code":"0000","message":"transfer done","txId":"tx-${randomUUID()}"}`,
    };
  });
}

/** Bytes this process has handed to write calls so far (`wchar` of /proc/self/io: the WAL's frames and the checkpoints' copies). */
function bytesWritten(): number {
  return Number(/^wchar: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'))![1]);
}

interface RunFigures {
  cpuUs: number;
  perSecond: number;
  bytesWritten: number;
}

/** One run: `transfers` new transfers written in batches on a new file; CPU µs, bytes written per transfer, transfers/s. */
function run(variant: FloorVariant, all: readonly FloorTransfer[], tag: string): RunFigures {
  const path = join(dir, `${tag}-${variant}.db`);
  const db = openFloorDb(path, variant, cacheKb);
  try {
    const writer = FLOOR_WRITERS[variant](db);
    const cpu = process.cpuUsage();
    const written = bytesWritten();
    const t0 = performance.now();
    for (let i = 0; i < all.length; i += batchSize) {
      const batch = all.slice(i, i + batchSize);
      const now = Date.now();
      writer.claim(batch, now);
      writer.answer(batch, now + 1);
    }
    const wallMs = performance.now() - t0;
    const used = process.cpuUsage(cpu);
    const bytes = bytesWritten() - written;
    const counts = db.prepare(`SELECT (SELECT count(*) FROM events) AS events, (SELECT count(*) FROM ledger WHERE status = 'DONE' AND last_seq = 2) AS done`).get() as { events: number; done: number };
    if (counts.events !== 3 * all.length || counts.done !== all.length) throw new Error(`${variant} wrote ${counts.events} events and ${counts.done} DONE rows for ${all.length} transfers`);
    return { cpuUs: (used.user + used.system) / all.length, perSecond: all.length / (wallMs / 1000), bytesWritten: bytes / all.length };
  } finally {
    db.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true });
  }
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

try {
  const loadAtStart = loadavg();
  // Warm up (JIT, the statements' first preparations) on a small run of each.
  for (const v of VARIANTS) run(v, makeTransfers(batchSize * 20), 'warm');
  const results = new Map<FloorVariant, RunFigures[]>(VARIANTS.map((v) => [v, []]));
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? VARIANTS : [...VARIANTS].reverse();
    for (const v of order) {
      const r = run(v, makeTransfers(transfers), `r${round}`);
      results.get(v)!.push(r);
      if (!values.json) process.stderr.write(`round ${round}: ${v} ${r.cpuUs.toFixed(1)} µs, ${r.bytesWritten.toFixed(0)} bytes written per transfer, ${r.perSecond.toFixed(0)} transfers/s\n`);
    }
  }
  const loadAtEnd = loadavg();
  const summary = {
    transfers,
    batch: batchSize,
    rounds,
    cacheKb,
    loadAverage: { start: loadAtStart, end: loadAtEnd },
    variants: VARIANTS.map((v) => ({
      variant: v,
      cpuUs: median(results.get(v)!.map((r) => r.cpuUs)),
      perSecond: median(results.get(v)!.map((r) => r.perSecond)),
      bytesWritten: median(results.get(v)!.map((r) => r.bytesWritten)),
      rounds: results.get(v)!,
    })),
  };
  /** Each variant ÷ row, CPU per transfer: the median of the rounds' ratios. */
  const toRow = (v: FloorVariant) => median(results.get(v)!.map((r, i) => r.cpuUs / results.get('row')![i]!.cpuUs));
  if (values.json) {
    process.stdout.write(JSON.stringify({ ...summary, variants: summary.variants.map((v) => ({ ...v, toRow: toRow(v.variant) })) }, null, 2) + '\n');
  } else {
    const la = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(' ');
    const describe: Record<FloorVariant, string> = {
      row: 'one statement per row (5 executions per transfer)',
      byClaim: 'one statement per row, the ledger keyed by its Claimed event\'s position (no GUID index of its own)',
      json: `one statement per table and batch over json_each (4 executions per ${batchSize} transfers)`,
      jsonb: `one statement per table and batch over jsonb_each (4 executions per ${batchSize} transfers)`,
    };
    process.stdout.write(
      [
        `${transfers} transfers per run in batches of ${batchSize} (claim + outcome transactions), random UUIDs, WAL, synchronous=OFF, cache ${cacheKb} KB; ` +
          `medians of ${rounds} alternating rounds; load average ${la(loadAtStart)} at the start, ${la(loadAtEnd)} at the end:`,
        '',
        '| variant | CPU µs per transfer | ÷ row (median of the rounds\' ratios) | bytes written per transfer (WAL, checkpoints) | transfers/s (wall clock) |',
        '|---|---|---|---|---|',
        ...summary.variants.map(
          (v) =>
            `| ${describe[v.variant]} | ${v.cpuUs.toFixed(1)} | ${toRow(v.variant).toFixed(2)} | ${Math.round(v.bytesWritten).toLocaleString('en-US')} | ` +
            `${Math.round(v.perSecond).toLocaleString('en-US')} |`,
        ),
      ].join('\n') + '\n',
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
