import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TimelineEntry } from '../../src/commands/history.js';
import { orThrow } from '../../src/events/storeResult.js';
import { openLedger } from '../support/ledgerStore.js';
import { cli } from '../support/commandsSeed.js';
import { makeKeys, startHarness, transfer, type Harness } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';
import { useCleanup } from '../support/cleanup.js';

/**
 * The audit trail end to end (#15): a real `serve` with keys on a real ledger file, real HTTP, `purge` and
 * `history` as real processes. Every request for the GUID leaves a record, the first one, resends and refusals
 * (E904, E905) included, and every event says who wrote it.
 */
describe('audit trail over HTTP', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const harness = async (dir: string, opts: Parameters<typeof startHarness>[1] = {}): Promise<Harness> => cleanup.use(await startHarness(dir, opts));

  it('a transfer, its resend, an E904 under another amount and another key, an E905 after purge: all recorded; history --requests tells it', async () => {
    const dir = tmp();
    const keys = makeKeys(join(dir, 'keys'), { 'shop-a': ['transfer'], 'shop-b': ['transfer'] });
    const [shop, other] = [keys.tokens['shop-a']!, keys.tokens['shop-b']!];
    const h = await harness(dir, { relay: { keys: keys.ring, minAgeMs: 1500 } });
    const as = (t: string) => ({ authorization: `Bearer ${t}` });

    const t = transfer({ from: '6222021001', to: '6222021002', amount: 1500 });
    const body = JSON.stringify(t);
    const guid = String(t['guid']);
    const first = await h.post(body, as(shop));
    expect(first.json()['code']).toBe('0000');
    expect((await h.post(body, as(shop))).headers['idempotent-replayed']).toBe('true');
    expect((await h.post(JSON.stringify({ ...t, amount: 1501 }), as(shop))).json()['code']).toBe('E904');
    expect((await h.post(body, as(other))).json()['code']).toBe('E904');
    // Not for a GUID the ledger does not have: a bad body stores nothing, and records nothing either.
    expect((await h.post('{"guid":"NEVER-1"}', as(shop))).json()['code']).toBe('E400');

    const purge = await cli(['purge', '--retention', '0ms', '--db', h.db]);
    expect(purge.code).toBe(0);
    const gone = await h.post(body, as(shop));
    expect([gone.status, gone.json()['code']]).toEqual([410, 'E905']);

    // Written off the request path, in batches: they arrive within a flush interval or so.
    const store = openLedger(h.db);
    try {
      const records = await waitFor(async () => {
        const r = await orThrow(store.readRequests(guid));
        return r.length >= 5 ? r : null;
      }, { what: 'five request records' });
      expect(records.map((r) => [r.key, r.code, r.fingerprintMatch])).toEqual([
        ['shop-a', '0000', true],
        ['shop-a', '0000', true],
        ['shop-a', 'E904', false],
        ['shop-b', 'E904', true],
        ['shop-a', 'E905', true],
      ]);
      expect(await orThrow(store.readRequests('NEVER-1'))).toEqual([]);

      const events = await orThrow(store.readStream(guid));
      expect(events.map((e) => e.type)).toEqual(['Claimed', 'Sent', 'Answered', 'Purged']);
      const served = { by: 'serve', host: hostname(), pid: process.pid, key: 'shop-a', params: { timeoutMs: 1000, maxAttempts: 3, minAgeMs: 1500 } };
      for (const e of events.slice(0, 3)) expect(e.actor).toEqual(served);
      expect(events[3]!.actor).toMatchObject({ by: 'purge', host: hostname(), params: { retentionMs: 0 } });
      expect(events[3]!.actor!.pid).not.toBe(process.pid);
      // The tombstone: the final code, and a SHA-256 of the answer the channel got, byte for byte.
      expect(events[3]!.data).toMatchObject({ code: '0000', responseSha256: createHash('sha256').update(first.body).digest('hex') });
    } finally {
      await store.close();
    }

    const human = await cli(['history', guid, '--requests', '--db', h.db]);
    expect(human.code).toBe(0);
    const lines = human.stdout.split('\n');
    const firstRequest = lines.findIndex((l) => /^ {5}\S+Z {2}request {8}answered 0000, key shop-a$/.test(l));
    const claimed = lines.findIndex((l) => /^ {2}0 {2}\S+Z {2}Claimed {8}by serve pid \d+ on .+, key shop-a, timeoutMs=1000, maxAttempts=3, minAgeMs=1500$/.test(l));
    expect(firstRequest).toBeGreaterThanOrEqual(0);
    expect(claimed).toBeGreaterThan(firstRequest);
    // The resend got the stored answer: marked, so that it does not read as a second transfer (#28).
    expect(human.stdout).toMatch(/^ {5}\S+Z {2}request {8}answered 0000 \(replayed: the stored answer, nothing sent\), key shop-a$/m);
    expect(human.stdout.match(/answered 0000/g)).toHaveLength(2);
    expect(human.stdout).toMatch(/answered E904, key shop-a, fingerprint differs/);
    expect(human.stdout).toMatch(/answered E905, key shop-a$/m);
    expect(human.stdout).toMatch(/ {2}3 {2}\S+Z {2}Purged {9}by purge pid \d+ on .+, retentionMs=0$/m);
    expect(human.stdout).toContain(`${guid}: 4 events, 5 channel requests; now PURGED 0000`);

    const json = await cli(['history', guid, '--requests', '--json', '--db', h.db]);
    const timeline = JSON.parse(json.stdout) as TimelineEntry[];
    expect(timeline.map((e) => (e.kind === 'event' ? e.type : `request ${e.code}`))).toEqual([
      'request 0000', 'Claimed', 'Sent', 'Answered', 'request 0000', 'request E904', 'request E904', 'Purged', 'request E905',
    ]);
    expect(timeline.flatMap((e) => (e.kind === 'request' ? [e.replayed] : []))).toEqual([false, true, false, false, false]);
    // Without --requests, the contract's array of {seq, type, at, data}.
    const plain = JSON.parse((await cli(['history', guid, '--json', '--db', h.db])).stdout) as Array<Record<string, unknown>>;
    expect(plain.map((e) => Object.keys(e).sort())).toEqual(Array(4).fill(['at', 'data', 'seq', 'type']));
  });

  it('history pretty-prints the request and the answer as stored (indented, numbers as written, controls escaped)', async () => {
    const dir = tmp();
    const h = await harness(dir);
    const body = '{"guid":"PRETTY-1","from":"6222021001","to":"6222021002","amount":1500,"memo":{"big":12345678901234567890,"tab":"a\\tb"}}';
    expect((await h.post(body)).json()['code']).toBe('0000');
    const human = await cli(['history', 'PRETTY-1', '--db', h.db]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(
      [
        '       request: {',
        '         "guid": "PRETTY-1",',
        '         "from": "6222021001",',
        '         "to": "6222021002",',
        '         "amount": 1500,',
        '         "memo": {',
        '           "big": 12345678901234567890,',
        '           "tab": "a\\tb"',
        '         }',
        '       }',
      ].join('\n'),
    );
    expect(human.stdout).toMatch(/^ {7}response: \{\n {9}"guid": "PRETTY-1",\n {9}"code": "0000",/m);
  });

  it('history says the amount as money (CONTRACT.md §5): major units by the currency\'s ISO 4217 minor units; --json keeps the minor units', async () => {
    const dir = tmp();
    const h = await harness(dir);
    const cases = [
      ['MONEY-CNY', ',"currency":"CNY"', 1500, 'money: 15.00 CNY (amount 1500 in minor units)'],
      ['MONEY-JPY', ',"currency":"JPY"', 1500, 'money: 1500 JPY (amount 1500 in minor units)'],
      ['MONEY-KWD', ',"currency":"KWD"', 7, 'money: 0.007 KWD (amount 7 in minor units)'],
      ['MONEY-NONE', '', 5, 'money: 0.05 (amount 5 in minor units)'],
    ] as const;
    for (const [guid, currency, amount, line] of cases) {
      expect((await h.post(`{"guid":"${guid}","from":"6222021001","to":"6222021002","amount":${amount}${currency}}`)).json()['code']).toBe('0000');
      const human = await cli(['history', guid, '--db', h.db]);
      expect(human.stdout.split('\n').filter((l) => l.includes('money:'))).toEqual([`       ${line}`]);
      const json = JSON.parse((await cli(['history', guid, '--json', '--db', h.db])).stdout) as Array<{ data: { request?: string } }>;
      expect(JSON.parse(json[0]!.data.request!)).toMatchObject({ amount });
    }
  });

  it('a request nested 30,000 levels deep (#24): accepted, history prints a bounded text and exits 0, --json stays the stored bytes, the timeline route answers masked', async () => {
    const dir = tmp();
    const h = await harness(dir);
    const levels = 30_000;
    const body = `{"guid":"DEEP-1","from":"6222021001","to":"6222021002","amount":1500,"x":${'['.repeat(levels)}${']'.repeat(levels)}}`;
    expect(Buffer.byteLength(body)).toBeLessThan(64 * 1024);
    expect((await h.post(body)).json()['code']).toBe('0000');

    const human = await cli(['history', 'DEEP-1', '--db', h.db]);
    expect([human.code, human.stderr]).toEqual([0, '']);
    expect(human.stdout.length).toBeLessThan(16 * 1024);
    // The object and 31 arrays are shown; the array opening level 33 stands for the 29,969 levels left.
    expect(human.stdout).toContain(`…(nested ${levels + 1 - 32} levels deeper)`);
    expect(human.stdout).toContain('"from": "6222021001"');

    for (const args of [['--json'], ['--json', '--requests']]) {
      const json = await cli(['history', 'DEEP-1', ...args, '--db', h.db]);
      expect(json.code).toBe(0);
      const entries = JSON.parse(json.stdout) as Array<{ type: string; data: { request?: string } }>;
      expect(entries.find((e) => e.type === 'Claimed')?.data.request).toBe(body);
    }

    const view = await h.get('/v1/transfers/DEEP-1/events');
    expect(view.status).toBe(200);
    const claimed = (view.json()['timeline'] as TimelineEntry[]).find((e) => e.kind === 'event' && e.type === 'Claimed');
    const request = (claimed as { data: { request: Record<string, unknown> } } | undefined)?.data.request;
    expect(request).toMatchObject({ guid: 'DEEP-1', from: '******1001', to: '******1002' });
    let shown: unknown = request?.['x'];
    for (let level = 2; level <= 32; level++) shown = (shown as unknown[])[0];
    expect(shown).toBe(`…(nested ${levels + 1 - 32} levels deeper)`);
    expect(view.body).not.toContain('6222021001');
  });
});
