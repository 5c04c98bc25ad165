/**
 * What the store writes per transfer, and what it costs: a new GUID answered 0000, as the relay drives the store
 * (the row read of the route, `Submit`, `RecordAnswer`, and the request record, 256 to a write), with `--inflight`
 * transfers at once and random UUID GUIDs. Prints, per transfer: process CPU (user + system, every thread), bytes
 * the process wrote (/proc/self/io write_bytes: the WAL, checkpoints into the file), write calls, and the
 * ledger's bytes on disk at the end, with the rows it holds.
 *
 * Usage: node dist/bench/writePath.js [--transfers 30000] [--inflight 50] [--writer inline|thread]
 *          [--build DIR] [--runs 3] [--db postgres://…] [--frames] [--json]
 * `--frames` (SQLite): after the timed run, as many transfers again, the WAL frames they append counted by the B-tree
 * each page belongs to (walFrames.ts): what the commits write, per transfer and per commit.
 * `--build DIR`: also another build (its `dist` folder, e.g. of the commit before a change), run alternately with
 * this one, each in a process of its own: before and after from one run, with the ratio.
 * `--db postgres://…/DB`: the PostgreSQL store instead (each run makes a database of its own on that server and
 * drops it): this process's CPU, and the server's own per transfer (the backends of that database and the server's
 * WAL writer, checkpointer and background writer, from /proc: peers/storeServerCpu.ts); the file figures do not apply.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { benchArgs } from './benchArgs.js';
import { cpuBetween, postgresServer } from './peers/storeServerCpu.js';
import { throwawayDatabase } from './throwawayDatabase.js';
import { countWhile, emptyCensus, framesByTree } from './walFrames.js';

const { values } = benchArgs({
  run: 'node dist/bench/writePath.js',
  about: 'What the store writes per transfer and what it costs (a new GUID answered 0000, as the relay drives the store): CPU, bytes written, write calls, the ledger\'s bytes on disk.',
  options: {
    transfers: { type: 'string', default: '30000', value: 'N', help: 'transfers per run' },
    inflight: { type: 'string', default: '50', value: 'N', help: 'transfers at once' },
    writer: { type: 'string', default: 'inline', value: 'inline|thread', help: 'where commits run' },
    build: { type: 'string', value: 'DIR', help: "also another build (its dist folder), run alternately with this one: before and after from one run" },
    runs: { type: 'string', default: '3', value: 'N', help: 'runs of each build' },
    db: { type: 'string', value: 'postgres://…', help: 'the PostgreSQL store instead (a database of its own per run on that server)' },
    frames: { type: 'boolean', default: false, help: "SQLite: after the timed run, the WAL frames the commits write per transfer, by the table or index each page belongs to" },
    json: { type: 'boolean', default: false, help: 'print the results as JSON' },
    child: { type: 'string', value: 'DIST', help: "internal: run once in this process against that build's dist folder and print one JSON line" },
  },
});

interface Measured {
  cpuUs: number;
  /** PostgreSQL only: the server's CPU per transfer. */
  serverCpuUs?: number;
  writeBytes: number;
  writeCalls: number;
  fileBytes: number;
  rows: { events: number; ledger: number; requests: number };
  /** With --frames: WAL frames per transfer and per commit, by B-tree. */
  frames?: { transfers: number; perTransfer: number; transfersPerCommit: number; byTree: Array<{ tree: string; perTransfer: number; perCommit: number }> };
}

/** The process's I/O counters: bytes that reached the storage layer and write calls. */
function io(): { writeBytes: number; writeCalls: number } {
  const text = readFileSync('/proc/self/io', 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { writeBytes: field('write_bytes'), writeCalls: field('syscw') };
}

async function once(dist: string): Promise<Measured> {
  const transfers = Number(values.transfers);
  const inflight = Number(values.inflight);
  const writer = values.writer === 'thread' ? 'thread' : 'inline';
  const url = (p: string) => pathToFileURL(join(dist, p)).href;
  const { openStore, processActor } = (await import(url('src/store/openStore.js'))) as typeof import('../src/store/openStore.js');
  const server = values.db === undefined ? null : await throwawayDatabase(values.db, 'writepath');
  const dir = server === null ? mkdtempSync(join(tmpdir(), 'guidgate-writepath-')) : null;
  const pgServer = server === null ? null : await postgresServer(values.db!, new URL(server.url).pathname.slice(1));
  try {
    return await measure(server?.url ?? join(dir!, 'ledger.db'), pgServer);
  } finally {
    await pgServer?.close();
    await server?.drop();
    if (dir !== null) rmSync(dir, { recursive: true, force: true });
  }

  async function measure(path: string, pgServer: Awaited<ReturnType<typeof postgresServer>> | null): Promise<Measured> {
    const onPostgres = pgServer !== null;
    const store = await openStore(path, { synchronous: 'FULL', writer, actor: processActor('serve') });
    // As the relay's (src/relay/relayTransfer.ts): the outcome is the channel's reply, so it makes no notification due.
    const audit = { params: { timeoutMs: 3000, maxAttempts: 5, minAgeMs: 60_000 }, replied: true };
    const note = `,"note":"${'x'.repeat(150)}"`;
    let finished = 0;
    let records: Array<{ guid: string; at: number; key: null; code: string; fingerprintMatch: boolean }> = [];
    const flushRecords = async () => {
      const batch = records;
      records = [];
      if (batch.length > 0) await store.recordRequests(batch);
    };
    const one = async (): Promise<void> => {
      const guid = randomUUID();
      await store.getLedger(guid);
      const request = `{"guid":"${guid}","from":"ACC-1001","to":"ACC-2002","amount":100,"currency":"CNY"${note}}`;
      const claim = await store.execute(guid, { type: 'Submit', request, fingerprint: 'f'.repeat(64), timeoutMs: 3000, maxAttempts: 5 }, audit, { state: null });
      if (claim._tag !== 'Right' || claim.right.kind !== 'applied') throw new Error(`claim of ${guid} failed`);
      const response = `{"guid":"${guid}","code":"0000","message":"transfer done","txId":"tx-${randomUUID()}"}`;
      const answer = await store.execute(guid, { type: 'RecordAnswer', attempt: 1, code: '0000', response, latencyMs: 1 }, audit, { state: claim.right.state });
      if (answer._tag !== 'Right' || answer.right.kind !== 'applied') throw new Error(`answer of ${guid} failed`);
      records.push({ guid, at: Date.now(), key: null, code: '0000', fingerprintMatch: true });
      finished++;
      if (records.length >= 256) await flushRecords();
    };
    const run = async (n: number) => {
      let started = 0;
      await Promise.all(Array.from({ length: inflight }, async () => {
        while (started++ < n) await one();
      }));
      await flushRecords();
    };
    await run(Math.min(2000, transfers)); // warm: the JIT, the page cache
    const io0 = io();
    const server0 = await pgServer?.read();
    const cpu0 = process.cpuUsage();
    await run(transfers);
    const cpu = process.cpuUsage(cpu0);
    const server1 = await pgServer?.read();
    const serverCpu = server0 === undefined || server1 === undefined ? NaN : cpuBetween(server0, server1);
    const io1 = io();
    const census = emptyCensus();
    if (values.frames && !onPostgres) await countWhile(census, `${path}-wal`, () => finished, run(transfers));
    await store.close();
    const cpuUs = (cpu.user + cpu.system) / transfers;
    // On PostgreSQL this process writes no ledger file: the file figures do not apply.
    if (onPostgres) return { cpuUs, serverCpuUs: serverCpu / transfers, writeBytes: NaN, writeCalls: NaN, fileBytes: NaN, rows: { events: NaN, ledger: NaN, requests: NaN } };
    const count = async (table: string) => {
      const Database = (await import('better-sqlite3')).default;
      const db = new Database(path, { readonly: true });
      try {
        return Number((db.prepare(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n);
      } finally {
        db.close();
      }
    };
    const rows = { events: await count('events'), ledger: await count('ledger'), requests: await count('requests') };
    const fileBytes = statSync(path).size + (() => { try { return statSync(`${path}-wal`).size; } catch { return 0; } })();
    const frames = census.transfers === 0 ? undefined : { transfers: census.transfers, perTransfer: census.frames / census.transfers, transfersPerCommit: census.transfers / census.commits, byTree: framesByTree(census, path) };
    return {
      ...(frames === undefined ? {} : { frames }),
      cpuUs,
      writeBytes: (io1.writeBytes - io0.writeBytes) / transfers,
      writeCalls: (io1.writeCalls - io0.writeCalls) / transfers,
      fileBytes: fileBytes / rows.ledger,
      rows,
    };
  }
}

const here = resolve(dirname(fileURLToPath(import.meta.url)), '..');
if (values.child !== undefined) {
  process.stdout.write(`${JSON.stringify(await once(values.child))}\n`);
} else {
  const builds: Array<{ name: string; dist: string }> = [{ name: 'this build', dist: here }];
  if (values.build !== undefined) builds.push({ name: values.build, dist: resolve(values.build) });
  const script = fileURLToPath(import.meta.url);
  const results = new Map<string, Measured[]>(builds.map((b) => [b.name, []]));
  for (let r = 0; r < Number(values.runs); r++) {
    // Alternating, the order reversed every other run: drift on a shared machine hits both.
    for (const b of r % 2 === 0 ? builds : [...builds].reverse()) {
      const args = [script, '--child', b.dist, '--transfers', values.transfers, '--inflight', values.inflight, '--writer', values.writer, ...(values.db === undefined ? [] : ['--db', values.db]), ...(values.frames ? ['--frames'] : [])];
      const child = spawnSync(process.execPath, args, { encoding: 'utf8' });
      if (child.status !== 0) throw new Error(`${b.name}: ${child.stderr}`);
      results.get(b.name)!.push(JSON.parse(child.stdout) as Measured);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const summary = builds.map((b) => {
    const ms = results.get(b.name)!;
    return {
      build: b.name,
      cpuUs: median(ms.map((m) => m.cpuUs)),
      serverCpuUs: median(ms.map((m) => m.serverCpuUs ?? NaN)),
      writeBytes: median(ms.map((m) => m.writeBytes)),
      writeCalls: median(ms.map((m) => m.writeCalls)),
      fileBytes: median(ms.map((m) => m.fileBytes)),
      rows: ms[0]!.rows,
      frames: ms.at(-1)!.frames,
    };
  });
  if (values.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  else if (values.db !== undefined) {
    const lines = [
      `per transfer on PostgreSQL (${values.transfers} transfers, ${values.inflight} in flight, random UUID GUIDs; medians of ${values.runs} runs):`,
      '| build | process CPU µs | PostgreSQL server CPU µs |',
      '|---|---|---|',
      ...summary.map((s) => `| ${s.build} | ${s.cpuUs.toFixed(0)} | ${s.serverCpuUs.toFixed(0)} |`),
    ];
    if (summary.length === 2) {
      const [a, b] = summary as [typeof summary[0], typeof summary[0]];
      lines.push(`| ratio (this ÷ other) | ${(a.cpuUs / b.cpuUs).toFixed(2)}x | ${(a.serverCpuUs / b.serverCpuUs).toFixed(2)}x |`);
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  } else {
    const lines = [
      `per transfer (${values.transfers} transfers, ${values.inflight} in flight, random UUID GUIDs, writer ${values.writer}, FULL; medians of ${values.runs} runs):`,
      '| build | process CPU µs | bytes written | write calls | file bytes | rows: events, ledger, requests |',
      '|---|---|---|---|---|---|',
      ...summary.map((s) => `| ${s.build} | ${s.cpuUs.toFixed(0)} | ${s.writeBytes.toFixed(0)} | ${s.writeCalls.toFixed(1)} | ${s.fileBytes.toFixed(0)} | ${s.rows.events}, ${s.rows.ledger}, ${s.rows.requests} |`),
    ];
    if (summary.length === 2) {
      const [a, b] = summary as [typeof summary[0], typeof summary[0]];
      lines.push(`| ratio (this ÷ other) | ${(a.cpuUs / b.cpuUs).toFixed(2)}x | ${(a.writeBytes / b.writeBytes).toFixed(2)}x | ${(a.writeCalls / b.writeCalls).toFixed(2)}x | ${(a.fileBytes / b.fileBytes).toFixed(2)}x | |`);
    }
    for (const s of summary) {
      if (s.frames === undefined) continue;
      const f = s.frames;
      lines.push(
        '',
        `${s.build}, the WAL frames (4 KB pages) appended while ${f.transfers} transfers finished, after its last run: ${f.perTransfer.toFixed(2)} per transfer, ${f.transfersPerCommit.toFixed(1)} transfers per commit`,
        '| B-tree | frames per transfer | per commit |',
        '|---|---|---|',
        ...f.byTree.map((t) => `| ${t.tree} | ${t.perTransfer.toFixed(3)} | ${t.perCommit.toFixed(2)} |`),
      );
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  }
}
