/**
 * The PostgreSQL store's write transaction through two drivers (issues #26 and #29): node-postgres (`pg`, what the
 * store uses) and `postgres` (porsager/postgres), with the same statements and the same parameters as the store
 * sends (src/store/postgres/groupCommit.ts, writeBatch.ts): BEGIN; the batch's rows locked (SELECT … FOR UPDATE);
 * the server's clock; the one write statement (a CTE over unnest of text/integer/bigint arrays); COMMIT. A transfer
 * is two such transactions, as the relay makes them: the claim (Claimed + Sent, a new ledger row) and the answer
 * (Answered, the row moved on), each decided by the store's own planBatch beforehand, so that only the driver and
 * the server work while the CPU is counted.
 *
 * Prints, per variant and batch size, medians over the rounds (variants alternate, the order reversed every other
 * round): client CPU µs per transfer (process.cpuUsage), the server's CPU µs per transfer (its backends serving the
 * variant's connections, from /proc/PID/schedstat; and every process of the server when it is the benchmark's own),
 * transfers/s.
 *
 * Usage: node dist/bench/pgDriverBench.js [--rounds 5] [--transfers 1024] [--batch 1,16,64] [--inflight 2]
 *          [--variants pg,pg-unnamed,pg-pipelined,porsager,porsager-pipelined] [--url postgres://…] [--json]
 * Without `--url` the benchmark starts a PostgreSQL server of its own (test/support/pgCluster.ts, as the postgres
 * user) so that the server's CPU is its alone; with it, it makes a throwaway database on that server.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { benchArgs } from './benchArgs.js';
import pg from 'pg';
import postgres from 'postgres';
import { planBatch, type BatchPlan, type Unit } from '../src/store/shared/planBatch.js';
import { ledgerColumns } from '../src/store/postgres/ledgerColumns.js';
import { writeStatement, writeValues } from '../src/store/postgres/writeBatch.js';
import { plainArray } from '../src/store/postgres/binaryArrays.js';
import { SERVER_NOW_MS } from '../src/store/postgres/serverClock.js';
import { migrate } from '../src/store/postgres/schema.js';
import { ledgerProjection } from '../src/projections/ledgerProjection.js';
import type { LedgerState } from '../src/events/state.js';
import type { Actor } from '../src/events/codecs.js';
import { throwawayDatabase } from './throwawayDatabase.js';
import { processCpuUs, startServer, type PgServer } from '../test/support/pgCluster.js';

const { values } = benchArgs({
  run: 'node dist/bench/pgDriverBench.js',
  about: "The PostgreSQL store's write transaction through node-postgres and porsager/postgres, with the store's own statements: client and server CPU per transfer, transfers/s, medians per variant and batch size.",
  options: {
    rounds: { type: 'string', default: '5', value: 'N', help: 'rounds (the variants alternate, the order reversed every other round)' },
    transfers: { type: 'string', default: '1024', value: 'N', help: 'transfers per variant and round' },
    batch: { type: 'string', default: '1,16,64', value: 'LIST', help: 'batch sizes, separated by commas' },
    inflight: { type: 'string', default: '2', value: 'N', help: 'transactions in flight at once' },
    variants: { type: 'string', default: 'pg,pg-unnamed,pg-pipelined,porsager,porsager-pipelined', value: 'LIST', help: 'the variants to run, separated by commas' },
    url: { type: 'string', value: 'postgres://…', help: 'make a throwaway database on this server (default: start a PostgreSQL server of its own, as the postgres user)' },
    json: { type: 'boolean', default: false, help: 'print the results as JSON' },
  },
});
const rounds = Number(values.rounds);
const transfers = Number(values.transfers);
const batchSizes = values.batch.split(',').map(Number);
const inflight = Number(values.inflight);

// ---------------------------------------------------------------------------------------------------------------
// What the store sends

const columns = ledgerColumns(ledgerProjection.columns);
const SQL = {
  lock: 'SELECT * FROM ledger WHERE guid = ANY($1::text[]) ORDER BY guid FOR UPDATE',
  now: `SELECT ${SERVER_NOW_MS} AS now`,
  write: writeStatement(columns),
};

/** One write transaction as the store makes it: the GUIDs it locks and the write statement's parameters. */
interface Tx {
  readonly guids: string[];
  readonly params: unknown[];
  /** The same parameters with each array as its values, for porsager, which writes its own array literals. */
  readonly plainParams: unknown[];
}

/** The write statement's parameters, as writeBatch.ts binds them (no purge: no redactions): arrays in the binary format, or plain. */
const writeParams = (plan: BatchPlan): unknown[] => writeValues(columns, plan, []);
const plainWriteParams = (plan: BatchPlan): unknown[] => writeValues(columns, plan, [], plainArray);

/** Who writes, as `serve` stamps each event (src/events/codecs.ts actorOf). */
const actor: Actor = { by: 'serve', host: hostname(), pid: process.pid, params: { timeoutMs: 3000, maxAttempts: 5, minAgeMs: 60_000 } };
const note = `,"note":"${'x'.repeat(150)}"`;


/**
 * The claim and the answer transactions of `n` new transfers in batches of `size`, decided as the store decides
 * them (what writePath.ts sends: a 150-character extra field in the request, a 0000 answer).
 */
function transactions(n: number, size: number): Tx[] {
  const txs: Tx[] = [];
  const now = Date.now();
  for (let start = 0; start < n; start += size) {
    const guids = Array.from({ length: Math.min(size, n - start) }, () => randomUUID());
    const claims: Unit[] = guids.map((guid) => ({
      op: 'execute',
      guid,
      now,
      actor,
      command: { type: 'Submit', request: `{"guid":"${guid}","from":"ACC-1001","to":"ACC-2002","amount":100,"currency":"CNY"${note}}`, fingerprint: 'f'.repeat(64), timeoutMs: 3000, maxAttempts: 5 },
    }));
    const claimPlan = planBatch(claims, new Map(), ledgerProjection.stateToRow);
    const claimed = new Map<string, LedgerState>(claimPlan.units.map((u, i) => [guids[i]!, (u as { state: LedgerState }).state]));
    const answers: Unit[] = guids.map((guid) => ({
      op: 'execute',
      guid,
      now: now + 1,
      actor,
      command: { type: 'RecordAnswer', attempt: 1, code: '0000', response: `{"guid":"${guid}","code":"0000","message":"transfer done","txId":"tx-${randomUUID()}"}`, latencyMs: 1 },
    }));
    const answerPlan = planBatch(answers, claimed, ledgerProjection.stateToRow);
    if (claimPlan.units.some((u) => u.kind !== 'won') || answerPlan.units.some((u) => u.kind !== 'won')) throw new Error('the bench planned a unit that does not win');
    const sorted = [...guids].sort();
    txs.push(
      { guids: sorted, params: writeParams(claimPlan), plainParams: plainWriteParams(claimPlan) },
      { guids: sorted, params: writeParams(answerPlan), plainParams: plainWriteParams(answerPlan) },
    );
  }
  return txs;
}

// ---------------------------------------------------------------------------------------------------------------
// The drivers

/** bigint columns as numbers, as the store reads them (parseInt8 in postgresStore.ts). */
function parseInt8(text: string): number | string {
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : text;
}

const INT8 = 20;
const PG_TYPES = { getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === INT8 && format !== 'binary' ? parseInt8 : pg.types.getTypeParser(oid, format as 'text'))) as pg.CustomTypesConfig['getTypeParser'] };
const PORSAGER_TYPES = { int8: { to: INT8, from: [INT8], serialize: (x: unknown) => String(x), parse: parseInt8 } };

interface Runner {
  /** One write transaction; resolves after COMMIT with the rows the write statement returned. */
  run(tx: Tx): Promise<number>;
  close(): Promise<void>;
}

interface Variant {
  readonly name: string;
  readonly what: string;
  open(url: string, applicationName: string): Runner;
}

function checkWritten(rows: number, tx: Tx): number {
  // Every GUID of the batch won (one row each) and every event got its position.
  if (rows < tx.guids.length) throw new Error(`the write returned ${rows} rows for ${tx.guids.length} GUIDs`);
  return rows;
}

function pgVariant(name: string, what: string, opts: { named: boolean; pipeline: boolean }): Variant {
  return {
    name,
    what,
    open(url, applicationName) {
      const pool = new pg.Pool({
        connectionString: url,
        max: inflight,
        application_name: applicationName,
        ...(opts.pipeline ? { pipeline: true } : {}),
        types: PG_TYPES,
      } as pg.PoolConfig);
      const q = (client: pg.PoolClient, key: keyof typeof SQL, params: unknown[]) =>
        client.query(opts.named ? { name: `bench_${key}`, text: SQL[key], values: params } : { text: SQL[key], values: params });
      const write = (client: pg.PoolClient, tx: Tx) => q(client, 'write', tx.params);
      return {
        async run(tx) {
          const client = await pool.connect();
          try {
            if (opts.pipeline) {
              const [, , now] = await Promise.all([client.query('BEGIN'), q(client, 'lock', [tx.guids]), q(client, 'now', [])]);
              if (typeof now.rows[0]?.now !== 'number') throw new Error('the clock did not parse as a number');
              const [written] = await Promise.all([write(client, tx), client.query('COMMIT')]);
              return checkWritten(written.rowCount ?? 0, tx);
            }
            await client.query('BEGIN');
            await q(client, 'lock', [tx.guids]);
            const now = await q(client, 'now', []);
            if (typeof now.rows[0]?.now !== 'number') throw new Error('the clock did not parse as a number');
            const written = await write(client, tx);
            await client.query('COMMIT');
            return checkWritten(written.rowCount ?? 0, tx);
          } finally {
            client.release();
          }
        },
        close: () => pool.end(),
      };
    },
  };
}

function porsagerVariant(name: string, what: string, opts: { pipeline: boolean }): Variant {
  return {
    name,
    what,
    open(url, applicationName) {
      const sql = postgres(url, {
        max: inflight,
        connection: { application_name: applicationName },
        onnotice: () => undefined,
        types: PORSAGER_TYPES,
      });
      const q = (s: postgres.Sql | postgres.TransactionSql | postgres.ReservedSql, key: keyof typeof SQL, params: unknown[]) =>
        s.unsafe(SQL[key], params as postgres.ParameterOrJSON<never>[], { prepare: true });
      return {
        async run(tx) {
          if (opts.pipeline) {
            // A reserved connection and the transaction by hand: BEGIN, the lock and the clock in one round trip,
            // the write and COMMIT in the next (sql.begin awaits its BEGIN and sends COMMIT after the callback).
            const c = await sql.reserve();
            try {
              const [, , now] = await Promise.all([c.unsafe('BEGIN'), q(c, 'lock', [tx.guids]), q(c, 'now', [])]);
              if (typeof now[0]?.['now'] !== 'number') throw new Error('the clock did not parse as a number');
              const [written] = await Promise.all([q(c, 'write', tx.plainParams), c.unsafe('COMMIT')]);
              return checkWritten(written.length, tx);
            } catch (err) {
              await c.unsafe('ROLLBACK').catch(() => undefined);
              throw err;
            } finally {
              c.release();
            }
          }
          return sql.begin(async (t) => {
            await q(t, 'lock', [tx.guids]);
            const now = await q(t, 'now', []);
            if (typeof now[0]?.['now'] !== 'number') throw new Error('the clock did not parse as a number');
            const written = await q(t, 'write', tx.plainParams);
            return checkWritten(written.length, tx);
          });
        },
        close: () => sql.end({ timeout: 5 }),
      };
    },
  };
}

const VARIANTS: readonly Variant[] = [
  pgVariant('pg', 'node-postgres as the store today: named statements, 5 round trips (BEGIN, lock, clock, write, COMMIT)', { named: true, pipeline: false }),
  pgVariant('pg-unnamed', 'node-postgres, unnamed statements (parsed and planned every time), 5 round trips', { named: false, pipeline: false }),
  pgVariant('pg-pipelined', 'node-postgres with `pipeline: true`: BEGIN+lock+clock, then write+COMMIT: 2 round trips', { named: true, pipeline: true }),
  porsagerVariant('porsager', 'postgres (porsager): sql.begin, prepared statements, awaited one by one: 5 round trips', { pipeline: false }),
  porsagerVariant('porsager-pipelined', 'postgres (porsager): reserved connection, BEGIN+lock+clock, then write+COMMIT: 2 round trips', { pipeline: true }),
];

// ---------------------------------------------------------------------------------------------------------------
// The measurement

interface Measured {
  clientUs: number;
  backendUs: number;
  serverUs: number;
  perSecond: number;
}

/** The server's backends serving one variant's connections (by application_name), for their CPU from /proc. */
async function backendPids(adminUrl: string, applicationName: string): Promise<number[]> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    return (await c.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [applicationName])).rows.map((r) => r.pid);
  } finally {
    await c.end();
  }
}

async function drive(runner: Runner, txs: readonly Tx[]): Promise<void> {
  let next = 0;
  // Claim and answer of one batch one after the other, as a relay makes them; `inflight` batches at once.
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      for (let i = next; i < txs.length; i = next) {
        next = i + 2;
        await runner.run(txs[i]!);
        await runner.run(txs[i + 1]!);
      }
    }),
  );
}

async function measure(variant: Variant, size: number, url: string, server: PgServer | null): Promise<Measured> {
  const applicationName = `driverbench_${variant.name}`;
  const runner = variant.open(url, applicationName);
  try {
    await drive(runner, transactions(Math.max(size * inflight * 4, 64), size)); // warm: connections, statements, JIT
    const txs = transactions(transfers, size);
    const pids = await backendPids(url, applicationName);
    if (pids.length !== inflight) throw new Error(`${variant.name}: ${pids.length} backends, expected ${inflight}`);
    const backend0 = pids.reduce((s, p) => s + processCpuUs(p), 0);
    const serverCpuSince = server?.cpuSince() ?? (() => NaN);
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    await drive(runner, txs);
    const cpu = process.cpuUsage(cpu0);
    const seconds = (performance.now() - t0) / 1000;
    const backend = pids.reduce((s, p) => s + processCpuUs(p), 0) - backend0;
    const serverCpu = serverCpuSince();
    return { clientUs: (cpu.user + cpu.system) / transfers, backendUs: backend / transfers, serverUs: serverCpu / transfers, perSecond: transfers / seconds };
  } finally {
    await runner.close();
  }
}

/**
 * A transfer written by each variant and every row read back through both drivers, decoded by the store's
 * projection: the same states through either driver, and of the same shape whoever wrote them.
 */
async function checkSameRows(url: string): Promise<void> {
  for (const name of VARIANTS.map((v) => v.name)) {
    const runner = VARIANTS.find((v) => v.name === name)!.open(url, 'driverbench_check');
    try {
      for (const tx of transactions(1, 1)) await runner.run(tx);
    } finally {
      await runner.close();
    }
  }
  const viaPg = new pg.Pool({ connectionString: url, types: PG_TYPES });
  const viaPorsager = postgres(url, { max: 1, onnotice: () => undefined, types: PORSAGER_TYPES });
  try {
    const a = JSON.stringify((await viaPg.query('SELECT * FROM ledger ORDER BY guid')).rows.map((r) => ledgerProjection.rowToState(r)));
    const b = JSON.stringify((await viaPorsager.unsafe('SELECT * FROM ledger ORDER BY guid')).map((r) => ledgerProjection.rowToState(r)));
    if (a !== b) throw new Error(`the drivers read the ledger differently:\n${a}\n${b}`);
    const shapes = new Set((JSON.parse(a) as Array<Record<string, unknown>>).map((state) => JSON.stringify(Object.entries(state).map(([k, v]) => [k, v === null ? 'null' : typeof v]))));
    if (shapes.size !== 1) throw new Error(`the variants wrote rows of different shapes: ${[...shapes].join(' / ')}`);
  } finally {
    await viaPg.end();
    await viaPorsager.end();
  }
}

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
const chosen = values.variants.split(',').map((n) => {
  const v = VARIANTS.find((x) => x.name === n);
  if (v === undefined) throw new Error(`--variants: no variant ${n} (${VARIANTS.map((x) => x.name).join(', ')})`);
  return v;
});

const server = values.url === undefined ? await startServer() : null;
const database = await throwawayDatabase(values.url ?? server!.url, 'driverbench');
try {
  const setup = new pg.Client({ connectionString: database.url });
  await setup.connect();
  await migrate(setup);
  await setup.end();
  await checkSameRows(database.url);

  const results = new Map<string, Measured[]>();
  for (let r = 0; r < rounds; r++) {
    for (const variant of r % 2 === 0 ? chosen : [...chosen].reverse()) {
      for (const size of batchSizes) {
        const key = `${variant.name}|${size}`;
        results.set(key, [...(results.get(key) ?? []), await measure(variant, size, database.url, server)]);
      }
    }
  }
  const summary = chosen.flatMap((v) =>
    batchSizes.map((size) => {
      const ms = results.get(`${v.name}|${size}`)!;
      return { variant: v.name, batch: size, clientUs: median(ms.map((m) => m.clientUs)), backendUs: median(ms.map((m) => m.backendUs)), serverUs: median(ms.map((m) => m.serverUs)), perSecond: median(ms.map((m) => m.perSecond)) };
    }),
  );
  if (values.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  else {
    const base = (size: number) => summary.find((s) => s.variant === chosen[0]!.name && s.batch === size)!;
    const lines = [
      `per transfer (a claim and an answer transaction as the store writes them; ${transfers} transfers a run, ${inflight} transactions in flight; medians of ${rounds} alternating rounds; ratios against ${chosen[0]!.name})`,
      '| variant | batch | client CPU µs | ratio | server backends µs | whole server µs | transfers/s |',
      '|---|---|---|---|---|---|---|',
      ...summary.map((s) => `| ${s.variant} | ${s.batch} | ${s.clientUs.toFixed(1)} | ${(s.clientUs / base(s.batch).clientUs).toFixed(2)}x | ${s.backendUs.toFixed(1)} | ${Number.isNaN(s.serverUs) ? '—' : s.serverUs.toFixed(1)} | ${s.perSecond.toFixed(0)} |`),
      '',
      ...chosen.map((v) => `- ${v.name}: ${v.what}`),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  }
} finally {
  await database.drop();
  await server?.stop();
}
