import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, it, expect } from 'vitest';
import { openStore } from '../../src/store/openStore.js';
import { buildApp } from '../../src/relay/app.js';
import { createAccountClient } from '../../src/account/accountClient.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { startSimulator } from '../../src/simulator/index.js';
import { useTempDir } from '../support/tmp.js';
import type { EventStore } from '../../src/events/store.js';
import { seedRow } from '../support/commandsSeed.js';
import { refusingStore } from '../support/storeResult.js';

describe('a ledger that cannot be written', () => {
  const tmp = useTempDir();

  /** The app's log lines, parsed (pino writes one JSON object per line). */
  const logLines = () => {
    const lines: Array<Record<string, unknown>> = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString().split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    return { lines, stream };
  };

  /** A relay on a ledger closed under it, its log lines, and the simulator it must never call. */
  const closedLedgerApp = async () => {
    const store = await openStore(join(tmp(), 'l.db'));
    const sim = await startSimulator({ port: 0, host: '127.0.0.1' });
    const account = createAccountClient({ baseUrl: sim.url, timeoutMs: 1000 });
    const { lines, stream } = logLines();
    const app = buildApp({ store, account, metrics: createMetrics(store, Date.now), timeoutMs: 1000, maxAttempts: 3, logger: { level: 'info', stream } });
    await store.close();
    const close = async () => {
      await app.close();
      await account.close();
      await sim.close();
    };
    return { app, sim, lines, close };
  };

  it('every E503 of a transfer is logged once, with the store error code and its cause; the account system is not called', async () => {
    const { app, sim, lines, close } = await closedLedgerApp();
    try {
      const body = JSON.stringify({ guid: 'u-1', from: 'ACC-1', to: 'ACC-2', amount: 5 });
      const res = await app.inject({ method: 'POST', url: '/v1/transfers', headers: { 'content-type': 'application/json' }, payload: body });
      expect([res.statusCode, (res.json() as { code: string; guid: string }).code, (res.json() as { guid: string }).guid]).toEqual([503, 'E503', 'u-1']);
      const unavailable = lines.filter((l) => l['msg'] === 'ledger unavailable');
      expect(unavailable).toHaveLength(1);
      expect(unavailable[0]).toMatchObject({ guid: 'u-1', reply: 'E503', error: 'LEDGER_CLOSED', cause: 'ledger is closed' });
      expect(JSON.stringify(lines)).not.toContain('ACC-1');
      expect(sim.stats().totalCalls).toBe(0);
    } finally {
      await close();
    }
  });

  it('the operator API answers E503 for every read and action, each logged once with the store error code and its cause; no inquiry and no send is made', async () => {
    const { app, sim, lines, close } = await closedLedgerApp();
    try {
      const json = { 'content-type': 'application/json' };
      for (const [method, url] of [
        ['GET', '/v1/transfers/u-1/events'], ['GET', '/v1/ledger'], ['GET', '/v1/stats'],
        ['POST', '/v1/transfers/u-1/resolve'], ['POST', '/v1/transfers/u-1/reprocess'],
      ] as const) {
        const logged = lines.length;
        const res = await app.inject({ method, url, ...(method === 'POST' ? { headers: json, payload: '{}' } : {}) });
        expect([url, res.statusCode, (res.json() as { code: string }).code]).toEqual([url, 503, 'E503']);
        const unavailable = lines.slice(logged).filter((l) => l['msg'] === 'ledger unavailable');
        expect(unavailable.map((l) => [url, l['reply'], l['error'], l['cause']])).toEqual([[url, 'E503', 'LEDGER_CLOSED', 'ledger is closed']]);
      }
      expect(sim.stats().totalCalls).toBe(0);
    } finally {
      await close();
    }
  });

  it("an action's E503 from a ledger failure inside the command is logged once, with what the command reports", async () => {
    const store = await openStore(join(tmp(), 'l.db'));
    await seedRow(store, 'u-unknown', 'UNKNOWN');
    await seedRow(store, 'u-failed', 'FAILED');
    // The row reads fine; then one store method fails: the clock (resolve's run stops before any row) or a write (reprocess's row).
    let failing: keyof EventStore | null = null;
    const flaky = refusingStore(store, (m) => m === failing);
    const sim = await startSimulator({ port: 0, host: '127.0.0.1' });
    const account = createAccountClient({ baseUrl: sim.url, timeoutMs: 1000 });
    const { lines, stream } = logLines();
    const app = buildApp({ store: flaky, account, metrics: createMetrics(store, Date.now), timeoutMs: 1000, maxAttempts: 3, minAgeMs: 0, logger: { level: 'info', stream } });
    try {
      const act = async (url: string) => {
        const logged = lines.length;
        const res = await app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: '{}' });
        expect([url, res.statusCode, (res.json() as { code: string }).code]).toEqual([url, 503, 'E503']);
        return { res, logged: lines.slice(logged).filter((l) => l['msg'] === 'ledger unavailable') };
      };
      failing = 'now';
      const resolved = await act('/v1/transfers/u-unknown/resolve');
      expect(resolved.logged).toHaveLength(1);
      expect(resolved.logged[0]).toMatchObject({ guid: 'u-unknown', reply: 'E503', action: 'resolve', cause: 'resolve stopped: a ledger read or write failed' });
      failing = 'execute';
      const reprocessed = await act('/v1/transfers/u-failed/reprocess');
      expect(reprocessed.logged).toHaveLength(1);
      expect(reprocessed.logged[0]).toMatchObject({ guid: 'u-failed', reply: 'E503', action: 'reprocess', cause: 'disk I/O error' });
      expect((reprocessed.res.json() as { message: string }).message).toBe('ledger unavailable: disk I/O error');
      expect(sim.stats().totalCalls).toBe(0);
    } finally {
      await app.close();
      await account.close();
      await sim.close();
      await store.close();
    }
  });
  it('a resend of a settled transfer is a pure read: over a socket, with every store call but the row read refused, it is answered byte for byte and nothing is written', async () => {
    const store = await openStore(join(tmp(), 'l.db'));
    // Until the first answer is stored every call goes through; after it, only getLedger does (a ledger that lost its disk for writes).
    let readOnly = false;
    const called: string[] = [];
    const reads = refusingStore(store, (m) => {
      if (readOnly) called.push(m);
      return readOnly && m !== 'getLedger';
    });
    const sim = await startSimulator({ port: 0, host: '127.0.0.1' });
    const account = createAccountClient({ baseUrl: sim.url, timeoutMs: 1000 });
    const { lines, stream } = logLines();
    const app = buildApp({ store: reads, account, metrics: createMetrics(store, Date.now), timeoutMs: 1000, maxAttempts: 3, logger: { level: 'info', stream } });
    try {
      const url = `${await app.listen({ port: 0, host: '127.0.0.1' })}/v1/transfers`;
      const body = JSON.stringify({ guid: 'u-replay', from: 'ACC-1', to: 'ACC-2', amount: 5 });
      const post = async () => {
        const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: await res.text() };
      };
      const first = await post();
      expect([first.status, (JSON.parse(first.body) as { code: string }).code]).toEqual([200, '0000']);
      readOnly = true;
      for (let i = 0; i < 5; i++) expect(await post()).toEqual({ ...first, replayed: 'true' });
      expect(called.filter((m) => m !== 'getLedger' && m !== 'recordRequests')).toEqual([]);
      expect(called.filter((m) => m === 'getLedger')).toHaveLength(5);
      expect(sim.stats().totalCalls).toBe(1);
      expect(lines.filter((l) => l['msg'] === 'ledger unavailable')).toEqual([]);
    } finally {
      await app.close();
      await account.close();
      await sim.close();
      await store.close();
    }
  });
});
