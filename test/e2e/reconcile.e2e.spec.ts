/**
 * `guidgate reconcile` as an operator runs it (CONTRACT.md §8): real processes (the command, serve, the naive relay),
 * real sockets (the simulator's journal and inquiries, a journal endpoint that misbehaves), real SQLite ledgers.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { orThrow } from '../../src/events/storeResult.js';
import { openStore } from '../../src/store/openStore.js';
import { startSimulator, type Faults, type Simulator } from '../../src/simulator/index.js';
import { BIN, startServe } from '../support/serveProcess.js';
import { cli, seedRow, snapshot, transferBody, withoutGuidgateEnv } from '../support/commandsSeed.js';
import { useCleanup } from '../support/cleanup.js';
import { settleWithCommands, sigkillAndWait } from '../support/settle.js';
import { useTempDir } from '../support/tmp.js';
import { seededLedger } from '../support/ledgerStore.js';
import { csvText, ndjsonText, type EntrySpec } from '../support/reconcile.js';

const HOUR = 3_600_000;


/** The window around now: every row seeded by this test and every posting it makes fall in it. */
const around = (now = Date.now()) => ['--from', String(now - HOUR), '--to', String(now + HOUR), '--pending', '0'];

/** A posting that agrees with transferBody(guid) (the seeded rows' request). */
const posting = (guid: string, over: Partial<EntrySpec> = {}): EntrySpec => ({
  guid, from: 'ACC-6222021001', to: 'ACC-6222021002', amount: 1500, currency: 'CNY', appliedAt: Date.now(), ...over,
});

async function post(url: string, body: string): Promise<string> {
  const res = await request(`${url}/transfer`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  return res.body.text();
}

interface JsonRun {
  sha256: string | null;
  counts: Record<string, number>;
  severities: { P1: number; P2: number };
  breaks: Array<{ guid: string; category: string; severity: string; firstSeen: string | null }>;
  settled?: Array<{ guid: string; outcome: string; before: string; after: string; minAgeTrap: boolean }>;
  error?: { code: string; message: string };
}

describe('guidgate reconcile: journal files, exit codes and bad input', () => {
  const tmp = useTempDir();

  it('exit 0 when the NDJSON journal matches the ledger; changes nothing in the ledger', async () => {
    const db = await seededLedger(tmp(), (s) => Promise.all([seedRow(s, 'g-1', 'DONE'), seedRow(s, 'g-2', 'DONE')]));
    const file = join(tmp(), 'day.ndjson');
    writeFileSync(file, ndjsonText([posting('g-1'), posting('g-2')]));
    const before = snapshot(db);
    const r = await cli(['reconcile', '--db', db, '--journal', file, ...around()]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^matched\s+-\s+2\s+30\.00 CNY\s+30\.00 CNY$/m);
    expect(r.stdout).toMatch(/^no breaks$/m);
    expect(snapshot(db)).toEqual(before);
  }, 30_000);

  it('exit 1 on a break: one line per break then the summary with money per side; --json and --csv say the same', async () => {
    const db = await seededLedger(tmp(), (s) => Promise.all([seedRow(s, 'g-1', 'DONE'), seedRow(s, 'g-2', 'DONE'), seedRow(s, 'g-3', 'DONE')]));
    const file = join(tmp(), 'day.csv');
    writeFileSync(file, csvText([posting('g-1'), posting('g-2', { amount: 1600 }), posting('g-9')]));
    const r = await cli(['reconcile', '--db', db, '--journal', file, ...around()]);
    expect(r.code).toBe(1);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toMatch(/^P1 amount_mismatch g-2 {2}differs: amount {2}ledger: DONE 0000/);
    expect(lines[1]).toMatch(/^P2 missing_in_journal g-3 /);
    expect(lines[2]).toMatch(/^P2 missing_in_ledger g-9 {2}ledger: no row/);
    expect(r.stdout).toMatch(/^amount_mismatch\s+P1\s+1\s+15\.00 CNY\s+16\.00 CNY$/m);
    expect(r.stdout).toMatch(/^breaks: 3 \(P1 1, P2 2\)$/m);
    expect(r.stderr).toMatch(/3 breaks \(P1 1, P2 2\)/);

    const j = await cli(['reconcile', '--db', db, '--journal', file, ...around(), '--json']);
    expect(j.code).toBe(1);
    const run = JSON.parse(j.stdout) as JsonRun;
    expect(run.breaks.map((b) => [b.guid, b.category, b.severity])).toEqual([
      ['g-2', 'amount_mismatch', 'P1'], ['g-3', 'missing_in_journal', 'P2'], ['g-9', 'missing_in_ledger', 'P2'],
    ]);
    expect(run.counts['matched']).toBe(1);

    const c = await cli(['reconcile', '--db', db, '--journal', file, ...around(), '--csv']);
    expect(c.code).toBe(1);
    expect(c.stdout.trimEnd().split('\r\n').map((l) => l.split(',').slice(0, 3).join(','))).toEqual([
      'guid,category,severity', 'g-2,amount_mismatch,P1', 'g-3,missing_in_journal,P2', 'g-9,missing_in_ledger,P2',
    ]);

    // Each run is recorded in the ledger (window, source, SHA-256, counts), each break with the run that first saw it.
    const store = await openStore(db);
    try {
      const runs = await orThrow(store.reconciliations({ limit: 10 }));
      expect(runs).toHaveLength(3);
      expect(runs.map((x) => [x.summary.source, x.summary.sha256, x.summary.counts.matched])).toEqual(Array(3).fill([file, run.sha256, 1]));
      const last = (await orThrow(store.reconciliation(runs[0]!.id)))!;
      expect(last.breaks.map((b) => [b.guid, b.category, b.firstSeen])).toEqual([['g-2', 'amount_mismatch', runs[2]!.id], ['g-3', 'missing_in_journal', runs[2]!.id], ['g-9', 'missing_in_ledger', runs[2]!.id]]);
      // --json printed them so: the second run's breaks first seen in the first.
      expect(run.breaks.map((b) => b.firstSeen)).toEqual(Array(3).fill(runs[2]!.id));
    } finally {
      await store.close();
    }
    const history = await cli(['history', 'g-9', '--db', db]);
    expect(history.code).toBe(0);
    expect(history.stdout).toMatch(/reconciled +run \d+ over .*missing_in_ledger P2/);
  }, 30_000);

  it("--columns reads a core's own CSV header names, ISO times with an offset included", async () => {
    const db = await seededLedger(tmp(), (s) => seedRow(s, 'g-1', 'DONE'));
    const file = join(tmp(), 'core.csv');
    const names = { guid: 'TXN_NO', amount: 'AMT', applied_at: 'POSTED', from: 'DR', to: 'CR', ref: 'SEQ', currency: 'CCY' };
    const cst = (ms: number) => new Date(ms + 8 * HOUR).toISOString().replace('Z', '+08:00');
    writeFileSync(file, csvText([posting('g-1')], names, cst));
    const plain = await cli(['reconcile', '--db', db, '--journal', file, ...around()]);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toMatch(/journal line 1/);
    const mapped = await cli(['reconcile', '--db', db, '--journal', file, ...around(), '--columns', 'guid=TXN_NO,amount=AMT,applied_at=POSTED,from=DR,to=CR,ref=SEQ,currency=CCY']);
    expect(mapped.code, mapped.stdout + mapped.stderr).toBe(0);
    expect(mapped.stdout).toMatch(/^matched\s+-\s+1\s+15\.00 CNY\s+15\.00 CNY$/m);
  }, 30_000);

  it('a bad journal line stops the run: exit 1 naming the line and the field, in every form', async () => {
    const db = await seededLedger(tmp(), (s) => seedRow(s, 'g-1', 'DONE'));
    const file = join(tmp(), 'bad.ndjson');
    writeFileSync(file, ndjsonText([posting('g-1'), posting('g-2')]).replace('"amount":1500,"currency":"CNY","appliedAt"', '"amount":"15.00","currency":"CNY","appliedAt"'));
    const r = await cli(['reconcile', '--db', db, '--journal', file, ...around()]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/the run did not finish: journal line 1, amount: /);
    expect(r.stdout).toMatch(/^reconciliation did not finish: journal line 1, amount/m);
    const j = await cli(['reconcile', '--db', db, '--journal', file, ...around(), '--json']);
    expect(j.code).toBe(1);
    const run = JSON.parse(j.stdout) as JsonRun;
    expect(run.error?.code).toBe('JOURNAL_LINE');
    expect(run.counts).toBeNull();

    const csv = join(tmp(), 'bad.csv');
    writeFileSync(csv, csvText([posting('g-1'), posting('g-2')]).replace(/\r\n[^\r\n]*g-2[^\r\n]*/, (row) => row.replace(/^\r\n\d+/, '\r\nyesterday')));
    const c = await cli(['reconcile', '--db', db, '--journal', csv, ...around()]);
    expect(c.code).toBe(1);
    expect(c.stderr).toMatch(/journal line 3, applied_at: /);
  }, 30_000);

  it('bad usage exits 2 naming the flag, before anything is read', async () => {
    const db = await seededLedger(tmp());
    const file = join(tmp(), 'day.ndjson');
    writeFileSync(file, '');
    const cases: Array<[string[], RegExp]> = [
      [['--journal', file, '--to', '1000'], /--from: is required/],
      [['--journal', file, '--from', '2024-05-01T00:00:00', '--to', '2024-05-02T00:00:00Z'], /--from: .*has no offset/],
      [['--journal', file, '--from', '2000', '--to', '1000'], /--to: must be after --from/],
      [['--journal', file, ...around().slice(0, 4), '--pending', 'soon'], /--pending: soon is not a duration/],
      [[...around()], /--journal: give --journal FILE, or --account-url URL/],
      [['--journal', join(tmp(), 'day.txt'), ...around()], /--journal: cannot tell the format/],
      [['--journal', file, ...around(), '--columns', 'guid=TXN'], /--columns: maps a CSV journal/],
      [['--journal', join(tmp(), 'x.csv'), ...around(), '--columns', 'txn=TXN'], /--columns: "txn" is not a journal column/],
      [['--journal', file, ...around(), '--json', '--csv'], /--csv: give --json or --csv, not both/],
      [['--journal', file, ...around(), '--settle'], /--settle: needs --account-url/],
      [['--account-url', 'ftp://x', ...around()], /--account-url/],
    ];
    for (const [args, message] of cases) {
      const r = await cli(['reconcile', '--db', db, ...args]);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stdout).toBe('');
    }
  }, 60_000);

  it('a ledger that is not there exits 1 and creates nothing', async () => {
    const file = join(tmp(), 'day.ndjson');
    writeFileSync(file, '');
    const r = await cli(['reconcile', '--db', join(tmp(), 'none.db'), '--journal', file, ...around()]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no ledger at/);
  });
});

describe('guidgate reconcile: the journal endpoint', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  /** A journal endpoint that answers every request with `status`, `type` and `body`. */
  async function endpoint(status: number, type: string | null, body: string): Promise<string> {
    const server: Server = createServer((_req, res) => {
      res.writeHead(status, type === null ? {} : { 'content-type': type });
      res.end(body);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.add(() => new Promise((r) => server.close(r)));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it('anything but 200 NDJSON is an error of the journal (exit 1 naming it), never an empty journal', async () => {
    const db = await seededLedger(tmp());
    const cases: Array<[number, string | null, string, RegExp]> = [
      [500, 'text/plain', 'core is down', /answered HTTP 500: core is down/],
      [404, 'application/json', '{"code":"E404"}', /answered HTTP 404/],
      [200, 'text/html', '<html>login</html>', /answered Content-Type text\/html, not application\/x-ndjson/],
      [200, 'application/json', '', /answered Content-Type application\/json, not application\/x-ndjson/],
      [200, null, '', /answered without a Content-Type|not application\/x-ndjson/],
    ];
    for (const [status, type, body, message] of cases) {
      const url = await endpoint(status, type, body);
      const r = await cli(['reconcile', '--db', db, '--account-url', url, ...around()]);
      expect(r.code, `${status} ${type}: ${r.stdout}`).toBe(1);
      expect(r.stderr).toMatch(/the run did not finish: the journal at http:\/\/127\.0\.0\.1:\d+\/journal\?from=\d+&to=\d+ /);
      expect(r.stderr).toMatch(message);
      expect(r.stdout).not.toMatch(/no breaks/);
    }
    const closed = await endpoint(200, 'application/x-ndjson', '');
    const empty = await cli(['reconcile', '--db', db, '--account-url', closed, ...around()]);
    expect(empty.code, empty.stderr).toBe(0);
    expect(empty.stdout).toMatch(/0 entries read/);
  }, 60_000);

  it('asks the simulator over [from − pending, to + pending) and reconciles what it applied', async () => {
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const db = await seededLedger(tmp(), (s) => seedRow(s, 'g-1', 'DONE'));
    await post(sim.url, transferBody('g-1').body);
    const now = Date.now();
    const r = await cli(['reconcile', '--db', db, '--account-url', sim.url, '--from', String(now - HOUR), '--to', String(now + HOUR), '--pending', '5m', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const run = JSON.parse(r.stdout) as JsonRun & { source: string };
    expect(run.source).toBe(`${sim.url}/journal?from=${now - HOUR - 300_000}&to=${now + HOUR + 300_000}`);
    expect(run.counts['matched']).toBe(1);
  }, 30_000);
});

describe('guidgate reconcile --settle', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  it('an UNKNOWN and a FAILED row with a posting become DONE by inquiry, whatever their age, with no POST /transfer; a rejected row is left as it is', async () => {
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const db = await seededLedger(tmp(), async (s) => {
      await seedRow(s, 'u-1', 'UNKNOWN');
      await seedRow(s, 'f-1', 'FAILED');
      await seedRow(s, 'ok-1', 'DONE');
      const { body, fingerprint } = transferBody('r-1');
      await orThrow(s.execute('r-1', { type: 'Submit', request: body, fingerprint, timeoutMs: 1000, maxAttempts: 5 }));
      await orThrow(s.execute('r-1', { type: 'RecordAnswer', attempt: 1, code: 'B201', response: '{"guid":"r-1","code":"B201","message":"insufficient funds"}', latencyMs: 3 }));
    });
    // The account system applied each of them once (the answers never reached the relay, or came too late).
    for (const guid of ['u-1', 'f-1', 'ok-1', 'r-1']) await post(sim.url, transferBody(guid).body);
    const callsBefore = sim.stats().totalCalls;

    const dry = await cli(['reconcile', '--db', db, '--account-url', sim.url, ...around()]);
    expect(dry.code).toBe(1);
    expect(dry.stdout).toMatch(/^P1 unsettled_in_ledger f-1 {2}ledger: FAILED/m);
    expect(dry.stdout).toMatch(/^P2 unsettled_in_ledger u-1 {2}ledger: UNKNOWN/m);
    expect(dry.stdout).toMatch(/^P1 rejected_in_ledger r-1 {2}ledger: DONE B201/m);
    expect(dry.stdout).not.toMatch(/^settle/m);

    const r = await cli(['reconcile', '--db', db, '--account-url', sim.url, ...around(), '--settle']);
    expect(r.code).toBe(1); // the run saw breaks; they are settled now
    expect(r.stdout).toMatch(/^settle: 3 inquired$/m);
    expect(r.stdout).toMatch(/^settle f-1 unsettled_in_ledger: processed 0000, FAILED → DONE: the min-age trap caught: settled before any reprocess could send it again$/m);
    expect(r.stdout).toMatch(/^settle u-1 unsettled_in_ledger: processed 0000, UNKNOWN → DONE$/m);
    expect(r.stdout).toMatch(/^settle r-1 rejected_in_ledger: the account system says processed 0000; DONE unchanged \(a DONE row is final: take it up with the account system\)$/m);
    expect(sim.stats().totalCalls).toBe(callsBefore);
    for (const guid of ['u-1', 'f-1', 'ok-1', 'r-1']) expect(sim.stats().applied[guid]).toBe(1);

    // Recorded as resolve records it: a Resolved event from the inquiry, with the account system's answer.
    const h = await cli(['history', 'f-1', '--db', db, '--json']);
    const events = JSON.parse(h.stdout) as Array<{ type: string; data: { source?: string; code?: string } }>;
    expect(events.at(-1)).toMatchObject({ type: 'Resolved', data: { source: 'inquiry', code: '0000' } });

    const again = await cli(['reconcile', '--db', db, '--account-url', sim.url, ...around(), '--settle', '--json']);
    expect(again.code).toBe(1);
    const run = JSON.parse(again.stdout) as JsonRun;
    expect(run.breaks.map((b) => [b.guid, b.category])).toEqual([['r-1', 'rejected_in_ledger']]);
    expect(run.counts['matched']).toBe(3);
    expect(run.settled?.map((s) => [s.guid, s.outcome])).toEqual([['r-1', 'skipped']]);
  }, 60_000);
  it('a FAILED row the account system still calls absent, although its journal shows the posting, stays FAILED and is flagged not to be reprocessed', async () => {
    // Right after applying a transfer the account system answers 404 for a while (processingMs): the min-age trap.
    const sim = cleanup.use(await startSimulator({ port: 0, faults: { processingMs: 60_000 } }));
    const db = await seededLedger(tmp(), (s) => seedRow(s, 'f-2', 'FAILED'));
    await post(sim.url, transferBody('f-2').body);
    const r = await cli(['reconcile', '--db', db, '--account-url', sim.url, ...around(), '--settle', '--csv']);
    expect(r.code).toBe(1);
    expect(r.stdout.split('\r\n')[1]).toMatch(/^f-2,unsettled_in_ledger,P1,/);
    expect(r.stderr).toMatch(/^settle f-2 unsettled_in_ledger: the account system says absent although its journal shows a posting; FAILED unchanged: do not reprocess it before this is cleared up$/m);
    const h = await cli(['history', 'f-2', '--db', db, '--json']);
    expect((JSON.parse(h.stdout) as Array<{ type: string }>).at(-1)?.type).toBe('ConnectFailed');
    expect(sim.stats().applied['f-2']).toBe(1);
  }, 30_000);
});

describe('guidgate reconcile end to end: a chaos run through guidgate, and the naive relay', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const FAULTS: Partial<Faults> = { byGuidPrefix: { 'late-': 'late-answer', 'reset-': 'reset', 'hold-': 'hold' }, lateMs: 800, processingMs: 300 };
  const guids = (run: string, n: number) => Array.from({ length: n }, (_, i) => `${i % 5 === 1 ? 'late' : i % 5 === 3 ? 'reset' : i % 11 === 7 ? 'hold' : 'ok'}-${run}-${i}`);

  /** A channel that resends the same bytes on a timeout or a 5xx, up to 3 times. */
  async function channel(url: string, list: readonly string[]): Promise<void> {
    await Promise.all(
      list.map(async (guid) => {
        const { body } = transferBody(guid);
        for (let attempt = 0; attempt < 4; attempt++) {
          try {
            const res = await request(`${url}/v1/transfers`, { method: 'POST', body, headers: { 'content-type': 'application/json' }, headersTimeout: 500, bodyTimeout: 500 });
            await res.body.text();
            if (res.statusCode < 500 && res.statusCode !== 409) return;
          } catch {
            // a timeout: resend
          }
        }
      }),
    );
  }

  async function startNaiveProcess(accountUrl: string): Promise<string> {
    const child = spawn(process.execPath, [BIN, 'naive', '--port', '0', '--account-url', accountUrl, '--timeout', '300ms'], { stdio: ['ignore', 'pipe', 'pipe'], env: withoutGuidgateEnv() });
    cleanup.add(() => sigkillAndWait(child));
    return new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (m) resolve(m[1]!);
      });
      child.on('exit', (code) => reject(new Error(`naive exited ${code}: ${out}`)));
    });
  }

  it('after a chaos run through guidgate, settled by resolve and reprocess: no P1 break (and no break at all)', async () => {
    const sim: Simulator = cleanup.use(await startSimulator({ port: 0, faults: FAULTS }));
    const db = join(tmp(), 'gg.db');
    const started = Date.now();
    const serve = startServe(['--db', db, '--account-url', sim.url, '--timeout', '300ms', '--grace', '500ms', '--settle-every', '0'], withoutGuidgateEnv() as Record<string, string>);
    cleanup.add(() => sigkillAndWait(serve.child));
    const url = await serve.ready;
    await channel(url, guids('g', 40));
    await sigkillAndWait(serve.child);
    sim.resetFaults();
    await new Promise((r) => setTimeout(r, 1000)); // past the late answers and the processing time
    await settleWithCommands(db, sim.url, '500ms');
    const r = await cli(['reconcile', '--db', db, '--account-url', sim.url, '--from', String(started - 1000), '--to', String(Date.now() + 1000), '--pending', '0', '--json']);
    const run = JSON.parse(r.stdout) as JsonRun;
    expect(run.severities.P1, r.stdout).toBe(0);
    expect(run.breaks, r.stdout).toEqual([]);
    expect(r.code).toBe(0);
    expect(run.counts['matched']).toBe(40);
    expect(sim.stats().doubleApplied).toEqual([]);
  }, 90_000);

  it('after the naive relay: duplicate_in_journal for exactly the GUIDs the simulator applied twice', async () => {
    const sim: Simulator = cleanup.use(await startSimulator({ port: 0, faults: FAULTS }));
    const started = Date.now();
    const naive = await startNaiveProcess(sim.url);
    await channel(naive, guids('n', 40));
    await new Promise((r) => setTimeout(r, 1000)); // the late answers' postings are applied at once; wait out the rest
    const doubles = [...sim.stats().doubleApplied].sort();
    expect(doubles.length).toBeGreaterThan(0);
    // The naive relay keeps no ledger: an empty one, so every single posting is missing_in_ledger.
    const db = await seededLedger(tmp());
    const r = await cli(['reconcile', '--db', db, '--account-url', sim.url, '--from', String(started - 1000), '--to', String(Date.now() + 1000), '--pending', '0', '--json']);
    expect(r.code).toBe(1);
    const run = JSON.parse(r.stdout) as JsonRun;
    const dup = run.breaks.filter((b) => b.category === 'duplicate_in_journal');
    expect(dup.map((b) => b.guid).sort()).toEqual(doubles);
    expect(dup.every((b) => b.severity === 'P1')).toBe(true);
    expect(run.counts['duplicate_in_journal']! + run.counts['missing_in_ledger']!).toBe(Object.keys(sim.stats().applied).length);
  }, 90_000);
});
