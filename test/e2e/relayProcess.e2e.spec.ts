import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, it, expect } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { httpRequest, transfer } from '../support/relayHarness.js';
import { BIN, exited, startServe } from '../support/serveProcess.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { sigkillAndWait } from '../support/settle.js';
import { waitFor } from '../support/waitFor.js';
import { orThrow } from '../../src/events/storeResult.js';

describe('the relay as a process', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  let sim: Simulator;
  const useSim = async (opts: Parameters<typeof startSimulator>[0] = {}) => {
    sim = cleanup.use(await startSimulator({ port: 0, ...opts }));
    return sim;
  };
  const spawnServe = (args: string[], env: Record<string, string> = {}) => {
    const s = startServe(args, env);
    cleanup.add(() => sigkillAndWait(s.child));
    return s;
  };

  it('SIGKILL mid-flight, restart: resends get E903 then E901 and never cause a second call', async () => {
    await useSim({ faults: { mode: 'hold' } });
    const db = join(tmp(), 'l.db');
    const args = ['--db', db, '--account-url', sim.url, '--timeout', '1500ms', '--grace', '500ms'];
    const first = spawnServe(args);
    const url = await first.ready;
    const t = JSON.stringify(transfer());
    const guid = String(JSON.parse(t).guid);
    void httpRequest(`${url}/v1/transfers`, { method: 'POST', body: t }).catch(() => undefined);
    await waitFor(() => sim.guidStats(guid).calls > 0, { what: 'the call in flight' });
    expect(sim.guidStats(guid).calls).toBe(1);
    first.child.kill('SIGKILL');
    await exited(first.child);

    const second = spawnServe(args);
    const url2 = await second.ready;
    const soon = await httpRequest(`${url2}/v1/transfers`, { method: 'POST', body: t });
    expect(['E903', 'E901']).toContain(soon.json()['code']);
    // Past the Sent's timeout plus the grace, the sweep makes it UNKNOWN.
    await waitFor(async () => (await httpRequest(`${url2}/v1/transfers/${encodeURIComponent(guid)}`, { method: 'GET' })).json()['status'] === 'UNKNOWN', {
      intervalMs: 100,
      what: 'the sweep marking the orphaned row UNKNOWN',
    });
    const later = await httpRequest(`${url2}/v1/transfers`, { method: 'POST', body: t });
    expect([later.status, later.json()['code']]).toEqual([504, 'E901']);
    expect(sim.guidStats(guid).calls).toBe(1);
    second.child.kill('SIGTERM');
    expect(await exited(second.child)).toBe(0);
  }, 30_000);

  it('SIGTERM lets in-flight calls finish and records them: a normal restart leaves no orphans', async () => {
    await useSim({ latencyMs: 600 });
    const db = join(tmp(), 'l.db');
    const s = spawnServe(['--db', db, '--account-url', sim.url]);
    const url = await s.ready;
    const bodies = Array.from({ length: 5 }, () => JSON.stringify(transfer()));
    const replies = bodies.map((b) => httpRequest(`${url}/v1/transfers`, { method: 'POST', body: b }));
    await waitFor(() => sim.stats().totalCalls === 5, { what: 'five calls in flight' });
    s.child.kill('SIGTERM');
    const codes = (await Promise.all(replies)).map((r) => r.json()['code']);
    expect(codes).toEqual(['0000', '0000', '0000', '0000', '0000']);
    expect(await exited(s.child)).toBe(0);
    const store = openLedger(db);
    expect((await orThrow(store.countByStatus())).DONE.count).toBe(5);
    expect((await orThrow(store.queryLedger({ statuses: ['RECEIVED', 'SENT'] }))).length).toBe(0);
    await store.close();
  }, 30_000);

  it('SIGTERM with slow-body and keep-alive clients attached: the process exits by itself (within --timeout plus 5 s)', async () => {
    await useSim();
    // A body timeout far beyond the test's own: only the bounded shutdown can end these clients.
    const s = spawnServe(['--db', join(tmp(), 'l.db'), '--account-url', sim.url, '--timeout', '1s', '--body-timeout', '1h']);
    const { hostname, port } = new URL(await s.ready);
    const slow = await Promise.all(Array.from({ length: 5 }, () => new Promise<Socket>((resolve) => {
      const socket = connect(Number(port), hostname, () => resolve(socket));
      socket.on('error', () => {});
      socket.write('POST /v1/transfers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"gui');
      cleanup.add(() => void socket.destroy());
    })));
    expect((await httpRequest(`${await s.ready}/v1/transfers`, { method: 'POST', body: JSON.stringify(transfer()) })).json()['code']).toBe('0000');
    expect(slow.every((socket) => !socket.destroyed)).toBe(true);
    const cut = Promise.all(slow.map((socket) => new Promise((resolve) => socket.once('close', resolve))));
    s.child.kill('SIGTERM');
    expect(await exited(s.child)).toBe(0);
    await cut;
  }, 30_000);

  it('SIGTERM, then a request that ends while the calls in flight finish: answered E503 with Connection: close, and the process exits 0', async () => {
    await useSim({ faults: { byGuidPrefix: { 'held-': 'hold' } } });
    const s = spawnServe(['--db', join(tmp(), 'l.db'), '--account-url', sim.url, '--timeout', '2s']);
    const url = await s.ready;
    const { hostname, port } = new URL(url);
    // A call in flight holds the shutdown open (the account system holds it until the call times out).
    const held = httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(transfer({ guid: `held-${process.pid}` })) }).then((r) => r.json()['code'], (err: unknown) => String(err));
    await waitFor(() => sim.guidStats(`held-${process.pid}`).calls === 1, { what: 'the held call in flight' });
    // A request begun before SIGTERM and ended after the server stopped listening.
    const body = JSON.stringify(transfer());
    const socket = connect(Number(port), hostname);
    cleanup.add(() => void socket.destroy());
    let received = '';
    socket.setEncoding('latin1').on('data', (chunk: string) => (received += chunk)).on('error', () => {});
    await new Promise((resolve) => socket.write('POST /v1/transfers HTTP/1.1\r\nHost: x\r\n', resolve));
    s.child.kill('SIGTERM');
    await waitFor(() => new Promise<boolean>((resolve) => {
      const probe = connect(Number(port), hostname).on('connect', () => (probe.destroy(), resolve(false))).on('error', () => resolve(true));
    }), { what: 'the server no longer listening' });
    socket.write(`Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    expect(await exited(s.child)).toBe(0);
    expect(await held).toBe('E901');
    // Refused in the contract's shape: nothing stored, nothing sent.
    expect(received).toMatch(/^HTTP\/1\.1 503 [^\r]*\r\n(?:[^\r]+\r\n)*connection: close\r\n/im);
    expect(JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4))).toMatchObject({ code: 'E503' });
  }, 30_000);

  it('at start, the sweep settles what a dead process left: RECEIVED → FAILED, old SENT → UNKNOWN', async () => {
    await useSim();
    const db = join(tmp(), 'l.db');
    const longAgo = Date.now() - 60_000;
    const store = openLedger(db, { clock: () => longAgo });
    await orThrow(store.execute('ORPHAN-R', { type: 'Claim', request: '{"guid":"ORPHAN-R"}', fingerprint: 'f' }));
    await orThrow(store.execute('ORPHAN-S', { type: 'Submit', request: '{"guid":"ORPHAN-S"}', fingerprint: 'f', timeoutMs: 3000, maxAttempts: 5 }));
    await store.close();
    const s = spawnServe(['--db', db, '--account-url', sim.url]);
    const url = await s.ready;
    const r = (await httpRequest(`${url}/v1/transfers/ORPHAN-R`, { method: 'GET' })).json();
    const sRow = (await httpRequest(`${url}/v1/transfers/ORPHAN-S`, { method: 'GET' })).json();
    expect([r['status'], sRow['status']]).toEqual(['FAILED', 'UNKNOWN']);
    const check = openLedger(db);
    expect((await orThrow(check.readStream('ORPHAN-S'))).at(-1)).toMatchObject({ type: 'TimedOut', data: { reason: 'orphaned' } });
    expect((await orThrow(check.readStream('ORPHAN-R'))).at(-1)).toMatchObject({ type: 'ConnectFailed', data: { reason: 'never-sent' } });
    await check.close();
    expect(sim.stats().totalCalls).toBe(0);
  }, 30_000);

  it('SIGHUP without --keys (#28): logged as "no keys file to reload", never an exit; the relay goes on', async () => {
    await useSim();
    const s = spawnServe(['--db', join(tmp(), 'l.db'), '--account-url', sim.url]);
    const url = await s.ready;
    const post = async () => (await httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(transfer()) })).json()['code'];
    for (const n of [1, 2]) {
      s.child.kill('SIGHUP');
      await waitFor(() => s.output().split('no keys file to reload').length - 1 === n || s.child.exitCode !== null || s.child.signalCode !== null, { what: `SIGHUP ${n} logged` });
      expect([s.child.exitCode, s.child.signalCode]).toEqual([null, null]);
      expect(await post()).toBe('0000');
    }
    s.child.kill('SIGTERM');
    expect(await exited(s.child)).toBe(0);
  }, 30_000);

  it('flags come from GUIDGATE_* environment variables; the command line wins', async () => {
    await useSim();
    const dir = tmp();
    const s = spawnServe(['--db', join(dir, 'cli.db')], { GUIDGATE_DB: join(dir, 'env.db'), GUIDGATE_ACCOUNT_URL: sim.url, GUIDGATE_MAX_ATTEMPTS: '1' });
    const url = await s.ready;
    expect((await httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(transfer()) })).json()['code']).toBe('0000');
    expect(sim.stats().totalCalls).toBe(1);
    const { existsSync } = await import('node:fs');
    expect([existsSync(join(dir, 'cli.db')), existsSync(join(dir, 'env.db'))]).toEqual([true, false]);
  }, 30_000);

  it('without --account-url it starts the bundled simulator and says so', async () => {
    const s = spawnServe(['--db', join(tmp(), 'l.db')]);
    const url = await s.ready;
    expect(s.output()).toMatch(/started the bundled account simulator at http:\/\/127\.0\.0\.1:\d+/);
    const r = await httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(transfer()) });
    expect(r.json()['code']).toBe('0000');
  }, 30_000);

  /** serve without --account-url: its URL, the bundled simulator's, and the fault URL it printed. */
  const bundled = async () => {
    const s = spawnServe(['--db', join(tmp(), 'l.db')]);
    const url = await s.ready;
    const sim = /started the bundled account simulator at (http:\/\/127\.0\.0\.1:\d+)/.exec(s.output())?.[1];
    const faults = /inject faults: curl -s -X POST (\S+\/control\/faults) -d '\{"mode":"hold"\}'/.exec(s.output())?.[1];
    return { s, url, sim, faults };
  };
  /** The relay's answer to a transfer once the simulator behind it was told to answer E500 at `faultsUrl`. */
  const e500Through = async (url: string, faultsUrl: string) => {
    expect((await httpRequest(faultsUrl, { method: 'POST', body: '{"mode":"e500"}' })).status).toBe(200);
    return (await httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(transfer()) })).json()['code'];
  };
  const portFree = (port: number) => new Promise<boolean>((resolve) => {
    const probe = createServer().once('error', () => resolve(false)).listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });

  it("npm start's bundled simulator (#28): on 8090, where the docs' fault examples point, and it prints its fault URL", async () => {
    // Other tests' relays may hold 8090 for a moment: tried until this relay gets it.
    let got: Awaited<ReturnType<typeof bundled>> | undefined;
    for (let i = 0; i < 5 && got === undefined; i++) {
      if (!(await portFree(8090))) continue;
      const b = await bundled();
      if (b.sim === 'http://127.0.0.1:8090') got = b;
      else b.s.child.kill('SIGTERM');
    }
    expect(got?.sim).toBe('http://127.0.0.1:8090');
    expect(got!.faults).toBe('http://127.0.0.1:8090/control/faults');
    // The docs' example, as written.
    expect(await e500Through(got!.url, 'http://127.0.0.1:8090/control/faults')).toBe('E500');
  }, 60_000);

  it('8090 taken: the bundled simulator takes a free port, and the fault URL it prints is that one', async () => {
    const holder = createServer();
    const held = await new Promise<boolean>((resolve) => holder.once('error', () => resolve(false)).listen(8090, '127.0.0.1', () => resolve(true)));
    if (held) cleanup.add(() => new Promise<void>((resolve) => holder.close(() => resolve())));
    const b = await bundled();
    expect(b.sim).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(b.sim).not.toBe('http://127.0.0.1:8090');
    expect(b.faults).toBe(`${b.sim}/control/faults`);
    expect(await e500Through(b.url, b.faults!)).toBe('E500');
  }, 30_000);

  it('bad usage exits 2', async () => {
    const child = spawn(process.execPath, [BIN, 'serve', '--timeout', 'soon'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    expect(await exited(child)).toBe(2);
    expect(err).toMatch(/not a duration/);
  });
});
