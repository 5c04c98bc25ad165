import { describe, it, expect } from 'vitest';
import { join } from 'node:path';
import { openLedger } from '../support/ledgerStore.js';
import { createAccountClient } from '../../src/account/accountClient.js';
import { buildApp } from '../../src/relay/app.js';
import { REPLY_CODES } from '../../src/contract/codes.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { startSimulator } from '../../src/simulator/index.js';
import { startHarness, transfer, ledgerRowCount, type Harness } from '../support/relayHarness.js';
import { rawExchange } from '../support/rawHttp.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';

/** Contract v2 §2 at the HTTP edge: strict input, GET, /healthz and errors raised below the routes. */
describe('channel API v2 (real ledger file, real simulator; real sockets where the bytes on the wire are the point)', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const harness = async (dir: string, opts: Parameters<typeof startHarness>[1] = {}): Promise<Harness> => cleanup.use(await startHarness(dir, { via: 'inject', ...opts }));
  /** The reply is E400 naming `field` with this HTTP status, and nothing was stored or sent. */
  const refusedUntouched = (h: Harness, r: { status: number; json(): Record<string, unknown> }, status: number, field: string) => {
    expect([r.status, r.json()['code'], r.json()['field']]).toEqual([status, 'E400', field]);
    expect(ledgerRowCount(h.db)).toBe(0);
    expect(h.sim.stats().totalCalls).toBe(0);
  };

  it('Content-Type other than application/json, or none, is 415/E400 naming Content-Type; parameters and letter case are fine', async () => {
    // Over a socket: which Content-Type arrives (none, empty, odd spacing) is the point.
    const h = await harness(tmp(), { via: 'socket' });
    const body = JSON.stringify(transfer());
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', 'application/json-patch+json', 'json', '']) {
      refusedUntouched(h, await h.post(body, { 'content-type': type }), 415, 'Content-Type');
    }
    // No Content-Type header at all (undici sends none for a Buffer body when none is given).
    const bare = await rawExchange(h.relay.url, `POST /v1/transfers HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    expect(bare.reply.status).toBe(415);
    expect(JSON.parse(bare.reply.body)).toMatchObject({ code: 'E400', field: 'Content-Type' });
    expect(ledgerRowCount(h.db)).toBe(0);

    for (const type of ['application/json; charset=utf-8', 'Application/JSON', ' application/json ;charset=UTF-8']) {
      const t = JSON.stringify(transfer());
      const r = await h.post(t, { 'content-type': type });
      expect([r.status, r.json()['code']]).toEqual([200, '0000']);
    }
    // Accepted bodies are still forwarded byte for byte.
    expect(h.sim.stats().totalCalls).toBe(3);
  });

  it('an amount not written as digits only is E400 naming amount, nothing stored or sent', async () => {
    const h = await harness(tmp());
    for (const amount of ['1.0', '1e2', '-0', '0.99999999999999999', '1500.0000000000001', '1E3']) {
      refusedUntouched(h, await h.post(`{"guid":"AMT-1","from":"ACC-1001","to":"ACC-2002","amount":${amount}}`), 400, 'amount');
    }
    const ok = await h.post('{"guid":"AMT-2","from":"ACC-1001","to":"ACC-2002","amount": 1500 }');
    expect(ok.json()['code']).toBe('0000');
  });

  it('a key equal to a contract field but for letter case (Unicode case and NFKC included) is E400 naming that key (escapes decoded)', async () => {
    const h = await harness(tmp());
    const base = '"guid":"CASE-1","from":"ACC-1001","to":"ACC-2002","amount":100';
    for (const [extra, field] of [['"GUID":"CASE-2"', 'GUID'], ['"Amount":1', 'Amount'], ['"FROM":"ACC-9"', 'FROM'], ['"Currency":"USD"', 'Currency'], ['"\\u0054o":"ACC-9"', 'To'],
      // Unicode case and compatibility variants (#24): "guıd".toUpperCase() === "GUID", and Java's equalsIgnoreCase agrees.
      ['"gu\u0131d":"CASE-3"', 'gu\u0131d'], ['"GU\u0130D":"CASE-4"', 'GU\u0130D'], ['"\\u0131":0,"gu\\u0131d":"CASE-5"', 'gu\u0131d'], ['"\uff41\uff4d\uff4f\uff55\uff4e\uff54":1', '\uff41\uff4d\uff4f\uff55\uff4e\uff54']]) {
      refusedUntouched(h, await h.post(`{${base},${extra}}`), 400, field!);
    }
    // Nested keys are the body's own business and ride along untouched.
    expect((await h.post(`{${base},"meta":{"Amount":5}}`)).json()['code']).toBe('0000');
  });

  it('GET /v1/transfers/{guid} works for a GUID of 128 characters and never shows the request or the fingerprint', async () => {
    const h = await harness(tmp());
    const guid = `G${'x'.repeat(120)}:._-1234`.slice(0, 128);
    expect(guid).toHaveLength(128);
    const posted = await h.post(JSON.stringify(transfer({ guid })));
    expect(posted.json()['code']).toBe('0000');
    const got = await h.get(`/v1/transfers/${guid}`);
    expect(got.status).toBe(200);
    const row = got.json();
    expect(row).toMatchObject({ guid, status: 'DONE', code: '0000', attempts: 1 });
    expect(Object.keys(row)).not.toContain('request');
    expect(Object.keys(row)).not.toContain('fingerprint');
    expect(got.body).not.toContain('ACC-1001');
    expect(row['response']).toBe(posted.body);
    // Percent-encoded, the same GUID still fits.
    expect((await h.get(`/v1/transfers/${encodeURIComponent(guid).replace(/x/g, '%78')}`)).status).toBe(200);
    // 129 characters is not a GUID: E400; far longer than any GUID: 414/E400.
    const long = await h.get(`/v1/transfers/${guid}x`);
    expect([long.status, long.json()['code'], long.json()['field']]).toEqual([400, 'E400', 'guid']);
    const huge = await h.get(`/v1/transfers/${'y'.repeat(400)}`);
    expect([huge.status, huge.json()['code'], huge.json()['field']]).toEqual([414, 'E400', 'guid']);
  });

  it('errors raised below the routes answer in contract shape: bad URL 400, headers too large 431, unknown route or method E404', async () => {
    // Over a socket: these are raised by the HTTP parser and the router, below fastify's inject().
    const h = await harness(tmp(), { via: 'socket' });
    const badUrl = await h.get('/v1/transfers/%zz');
    expect([badUrl.status, badUrl.json()['code'], badUrl.json()['field']]).toEqual([400, 'E400', 'url']);

    const malformed = await rawExchange(h.relay.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n');
    expect(malformed.reply.status).toBe(400);
    expect(JSON.parse(malformed.reply.body)).toMatchObject({ code: 'E400' });

    const big = await rawExchange(h.relay.url, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(big.reply.status).toBe(431);
    expect(JSON.parse(big.reply.body)).toMatchObject({ code: 'E400', field: 'headers' });

    for (const [method, path] of [['GET', '/nowhere'], ['DELETE', '/v1/transfers/X-1'], ['PUT', '/v1/transfers'], ['GET', '/v1/transfers']] as const) {
      const r = await rawExchange(h.relay.url, `${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      expect([r.reply.status, JSON.parse(r.reply.body)['code']]).toEqual([404, 'E404']);
    }
    const huge = await h.post(JSON.stringify({ ...transfer(), pad: 'x'.repeat(70 * 1024) }));
    expect([huge.status, huge.json()['code'], huge.json()['field']]).toEqual([413, 'E400', 'body']);
    expect(ledgerRowCount(h.db)).toBe(0);
  });

  it('/healthz is 503/E503 with a reason when a transfer would get E503, and 200 {"status":"ok"} otherwise', async () => {
    const sim = await startSimulator({ port: 0 });
    const store = openLedger(join(tmp(), 'l.db'), { busyTimeoutMs: 200 });
    const account = createAccountClient({ baseUrl: sim.url, timeoutMs: 1000 });
    const app = buildApp({ store, account, metrics: createMetrics(store, Date.now), timeoutMs: 1000, maxAttempts: 3 });
    try {
      const ok = await app.inject({ method: 'GET', url: '/healthz' });
      expect([ok.statusCode, ok.body]).toEqual([200, '{"status":"ok"}']);
      await store.close(); // the ledger gone from under the relay
      const down = await app.inject({ method: 'GET', url: '/healthz' });
      expect(down.statusCode).toBe(503);
      expect(down.json()).toMatchObject({ code: 'E503', reason: expect.stringMatching(/closed/) });
      const t = await app.inject({ method: 'POST', url: '/v1/transfers', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(transfer()) });
      expect([t.statusCode, t.json()['code']]).toEqual([503, 'E503']);
      expect(sim.stats().totalCalls).toBe(0);
    } finally {
      await app.close();
      await account.close();
      await sim.close();
    }
  });

  it('/healthz reports what the readiness hook says (the ledger-file check plugs in here)', async () => {
    let reason: string | null = null;
    const h = await harness(tmp());
    const store = openLedger(h.db);
    const account = createAccountClient({ baseUrl: h.sim.url, timeoutMs: 1000 });
    const app = buildApp({ store, account, metrics: createMetrics(store, Date.now), timeoutMs: 1000, maxAttempts: 3, readiness: async () => reason });
    try {
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      reason = 'the ledger file was replaced';
      const r = await app.inject({ method: 'GET', url: '/healthz' });
      expect([r.statusCode, r.json()]).toEqual([503, { code: 'E503', message: REPLY_CODES.E503.message, reason }]);
    } finally {
      await app.close();
      await account.close();
      await store.close();
    }
  });
});
