import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it, expect, beforeAll } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { httpRequest, makeKeys, startHarness, transfer, type Harness, type HttpReply } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { orThrow } from '../../src/events/storeResult.js';

/** Keys on (CONTRACT.md §6), end to end: a real `serve` on a real ledger file, a real simulator, real sockets. */
describe('keys and scopes over HTTP', () => {
  let h: Harness;
  let dir: string;
  let tokens: Record<string, string> = {};
  // One ledger for the whole file.
  const tmp = useTempDir('file');
  const cleanup = useCleanup('file');

  beforeAll(async () => {
    dir = tmp();
    const keys = makeKeys(join(dir, 'keys'), { pay: ['transfer'], pay2: ['transfer'], reader: ['read'], ops: ['admin'] });
    tokens = keys.tokens;
    h = cleanup.use(await startHarness(dir, { relay: { keys: keys.ring } }));
  });

  const call = (method: 'GET' | 'POST', path: string, token: string | null, body?: string): Promise<HttpReply> =>
    httpRequest(`${h.relay.url}${path}`, { method, ...(body === undefined ? {} : { body }), headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  /** Calls the account system received for one GUID, as its own `/stats` counts them. */
  const callsAt = async (guid: string): Promise<number> => {
    const stats = (await httpRequest(`${h.sim.url}/stats`, { method: 'GET' })).json() as { calls: Record<string, number> };
    return stats.calls[guid] ?? 0;
  };
  const ledgerRow = async (guid: string) => {
    const store = openLedger(h.db, { writer: 'inline' });
    try {
      return { row: await orThrow(store.getLedger(guid)), events: await orThrow(store.readStream(guid)) };
    } finally {
      await store.close();
    }
  };

  const routes = [
    { name: 'POST /v1/transfers', method: 'POST' as const, path: () => '/v1/transfers', right: 'pay', wrong: 'reader', ok: 200 },
    { name: 'GET /v1/transfers/{guid}', method: 'GET' as const, path: () => '/v1/transfers/NO-SUCH-GUID', right: 'reader', wrong: 'ops', ok: 404 },
    { name: 'GET /metrics', method: 'GET' as const, path: () => '/metrics', right: 'reader', wrong: 'pay', ok: 200 },
  ];

  describe.each(routes)('$name', (route) => {
    const attempt = async (token: string | null) => {
      const t = transfer();
      const r = await call(route.method, route.path(), token, route.method === 'POST' ? JSON.stringify(t) : undefined);
      return { r, guid: String(t['guid']) };
    };
    const nothingStoredOrSent = async (guid: string) => {
      expect(await callsAt(guid)).toBe(0);
      expect((await ledgerRow(guid)).row).toBeNull();
    };

    it('no token: 401 E401 with WWW-Authenticate: Bearer; nothing stored, nothing sent', async () => {
      const { r, guid } = await attempt(null);
      expect(r.status).toBe(401);
      expect(r.json()['code']).toBe('E401');
      expect(r.headers['www-authenticate']).toBe('Bearer');
      await nothingStoredOrSent(guid);
    });
    it('a token no key matches: 401 E401; nothing stored, nothing sent', async () => {
      const { r, guid } = await attempt(`${tokens['pay']!.slice(0, -1)}x`);
      expect(r.status).toBe(401);
      expect(r.json()['code']).toBe('E401');
      expect(r.headers['www-authenticate']).toBe('Bearer');
      expect(r.body).not.toContain(tokens['pay']!.slice(0, -1));
      await nothingStoredOrSent(guid);
    });
    it('a known key without the scope: 403 E403; nothing stored, nothing sent', async () => {
      const { r, guid } = await attempt(tokens[route.wrong]!);
      expect(r.status).toBe(403);
      expect(r.json()['code']).toBe('E403');
      await nothingStoredOrSent(guid);
    });
    it('the right scope gets through', async () => {
      const { r } = await attempt(tokens[route.right]!);
      expect(r.status).toBe(route.ok);
      expect(['E401', 'E403']).not.toContain(r.status === 200 && route.name === 'GET /metrics' ? null : r.json()['code']);
    });
  });

  it('a request is refused before its body is read: no token with a broken or oversized body is 401, not E400/413', async () => {
    const broken = await call('POST', '/v1/transfers', null, '{"guid": "G-broken", ');
    expect([broken.status, broken.json()['code']]).toEqual([401, 'E401']);
    const big = await call('POST', '/v1/transfers', null, JSON.stringify(transfer({ pad: 'x'.repeat(100 * 1024) })));
    expect([big.status, big.json()['code']]).toEqual([401, 'E401']);
    // With the right key the same broken body is the relay's E400.
    expect((await call('POST', '/v1/transfers', tokens['pay']!, '{"guid": "G-broken", ')).json()['code']).toBe('E400');
  });

  it('/healthz needs no token', async () => {
    const r = await call('GET', '/healthz', null);
    expect(r.status).toBe(200);
  });

  it('an unknown route tells nothing without a key (401) and 404s with one', async () => {
    expect((await call('GET', '/v1/nothing-here', null)).status).toBe(401);
    expect((await call('GET', '/v1/nothing-here', tokens['reader']!)).json()['code']).toBe('E404');
  });

  it("a transfer-only key sees its own GUID, not another key's (E404), and cannot resend it (E904, no call, nothing shown)", async () => {
    const t = transfer({ from: 'ACC-7001', to: 'ACC-7002' });
    const guid = String(t['guid']);
    const body = JSON.stringify(t);
    const first = await call('POST', '/v1/transfers', tokens['pay']!, body);
    expect(first.json()['code']).toBe('0000');
    expect(await callsAt(guid)).toBe(1);

    const { row, events } = await ledgerRow(guid);
    expect(row?.channel).toBe('pay');
    expect(events[0]?.type).toBe('Claimed');
    expect((events[0]?.data as { channel?: string }).channel).toBe('pay');

    const own = await call('GET', `/v1/transfers/${guid}`, tokens['pay']!);
    expect(own.status).toBe(200);
    expect(own.json()['status']).toBe('DONE');

    const other = await call('GET', `/v1/transfers/${guid}`, tokens['pay2']!);
    expect(other.status).toBe(404);
    expect(other.json()).toEqual({ guid, code: 'E404', message: 'no such transfer' });

    const resend = await call('POST', '/v1/transfers', tokens['pay2']!, body);
    expect(resend.status).toBe(422);
    expect(resend.json()).toEqual({ guid, code: 'E904', message: 'GUID reused with a different request' });
    expect(resend.headers['idempotent-replayed']).toBeUndefined();
    expect(await callsAt(guid)).toBe(1);
    const after = await ledgerRow(guid);
    expect(after.row).toEqual(row);
    expect(after.events).toHaveLength(events.length);

    // The key that claimed it still gets its stored answer; a read key sees the row.
    const mine = await call('POST', '/v1/transfers', tokens['pay']!, body);
    expect(mine.body).toBe(first.body);
    expect(mine.headers['idempotent-replayed']).toBe('true');
    expect((await call('GET', `/v1/transfers/${guid}`, tokens['reader']!)).status).toBe(200);
    expect(await callsAt(guid)).toBe(1);
  });

  it('no token is written to the ledger', async () => {
    const bytes = readdirSync(dir).filter((f) => f.startsWith('ledger.db')).map((f) => readFileSync(join(dir, f)).toString('latin1')).join('');
    expect(bytes.length).toBeGreaterThan(0);
    for (const token of Object.values(tokens)) expect(bytes).not.toContain(token);
  });
});
