import Database from 'better-sqlite3';
import { describe, it, expect } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { REPLY_CODES } from '../../src/contract/codes.js';
import { freePort, startHarness, transfer, ledgerRowCount, type Harness } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';
import { useCleanup } from '../support/cleanup.js';
import { orThrow } from '../../src/events/storeResult.js';

describe('relay end to end (real sockets, real ledger file, real simulator)', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const harness = async (dir: string, opts: Parameters<typeof startHarness>[1] = {}): Promise<Harness> => cleanup.use(await startHarness(dir, { via: 'inject', ...opts }));

  it('0000: the first answer is the account system body byte for byte, and every resend replays it without a call', async () => {
    const h = await harness(tmp());
    const t = transfer({ memo: 'ünïcødé  spaced', nested: { a: [1, 2] } });
    const first = await h.post(JSON.stringify(t));
    expect(first.status).toBe(200);
    expect(first.json()).toMatchObject({ guid: t['guid'], code: '0000' });
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    // The simulator's stored answer (inquiry) is what it sent: compare bytes.
    const inquiry = await fetch(`${h.sim.url}/transfer/${String(t['guid'])}`);
    expect(first.body).toBe(await inquiry.text());
    for (let i = 0; i < 3; i++) {
      const again = await h.post(JSON.stringify(t));
      expect(again.status).toBe(200);
      expect(again.body).toBe(first.body);
      expect(again.headers['idempotent-replayed']).toBe('true');
    }
    expect(h.sim.guidStats(String(t['guid']))).toMatchObject({ calls: 1, applied: 1 });
  });

  it('the fingerprint ignores key order and extra fields; the forwarded body is the original bytes', async () => {
    const h = await harness(tmp());
    const raw = '{ "amount":100,"to":"ACC-2002" , "guid":"FP-1","from":"ACC-1001","x":1}';
    expect((await h.post(raw)).status).toBe(200);
    const reordered = await h.post('{"guid":"FP-1","from":"ACC-1001","to":"ACC-2002","amount":100,"x":2,"y":"z"}');
    expect(reordered.headers['idempotent-replayed']).toBe('true');
    const store = openLedger(h.db);
    expect((await orThrow(store.getLedger('FP-1')))?.request).toBe(raw);
    await store.close();
  });

  it('B201 and B202 are definite answers: stored and replayed', async () => {
    const h = await harness(tmp());
    const poor = transfer({ amount: 9_000_000_000_000_000 });
    const r1 = await h.post(JSON.stringify(poor));
    expect([r1.status, r1.json()['code']]).toEqual([200, 'B201']);
    const unknownAccount = transfer({ to: 'X-404' });
    const r2 = await h.post(JSON.stringify(unknownAccount));
    expect([r2.status, r2.json()['code']]).toEqual([200, 'B202']);
    const again = await h.post(JSON.stringify(unknownAccount));
    expect(again.body).toBe(r2.body);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(h.sim.stats().totalCalls).toBe(2);
  });

  it('E500 from the account system is definite: stored and replayed', async () => {
    const h = await harness(tmp(), { sim: { faults: { mode: 'e500' } } });
    const t = transfer();
    const r = await h.post(JSON.stringify(t));
    expect([r.status, r.json()['code']]).toEqual([200, 'E500']);
    expect((await h.post(JSON.stringify(t))).headers['idempotent-replayed']).toBe('true');
    expect(h.sim.stats().totalCalls).toBe(1);
  });

  it.each([
    ['hold (no answer before the timeout)', 'hold', 0],
    ['reset after applying', 'reset', 1],
    ['garbage 502', 'garbage', 0],
  ] as const)('E901 on %s; resends get E901 without a call', async (_name, mode, applied) => {
    const h = await harness(tmp(), { sim: { faults: { mode } }, relay: { timeoutMs: 400 } });
    const t = transfer();
    const r = await h.post(JSON.stringify(t));
    expect([r.status, r.json()['code']]).toEqual([504, 'E901']);
    h.sim.resetFaults();
    const again = await h.post(JSON.stringify(t));
    expect([again.status, again.json()['code']]).toEqual([504, 'E901']);
    expect(h.sim.guidStats(String(t['guid']))).toMatchObject({ calls: 1, applied });
    const row = await h.get(`/v1/transfers/${String(t['guid'])}`);
    expect(row.json()).toMatchObject({ status: 'UNKNOWN', code: 'E901', attempts: 1 });
  });

  it('E902 when the connection is refused; a resend sends the stored bytes again until the attempt cap', async () => {
    const port = await freePort();
    const h = await harness(tmp(), { relay: { accountUrl: `http://127.0.0.1:${port}`, maxAttempts: 2 } });
    const t = transfer();
    const r1 = await h.post(JSON.stringify(t));
    expect([r1.status, r1.json()['code']]).toEqual([503, 'E902']);
    const r2 = await h.post(JSON.stringify(t));
    expect(r2.json()['code']).toBe('E902');
    expect((await h.get(`/v1/transfers/${String(t['guid'])}`)).json()).toMatchObject({ status: 'FAILED', attempts: 2 });
    const r3 = await h.post(JSON.stringify(t));
    expect([r3.status, r3.json()['code']]).toEqual([503, 'E902']);
    expect(String(r3.json()['message'])).toMatch(/attempt cap/);
    expect((await h.get(`/v1/transfers/${String(t['guid'])}`)).json()).toMatchObject({ attempts: 2 });
  });

  it('E902 then, once the account system is back, the resend is sent and answered (one application)', async () => {
    const h = await harness(tmp());
    const t = transfer();
    // Refusing until the E902 is seen, not for a window a loaded machine may overrun.
    const refusing = h.sim.refuseConnections(60_000);
    expect((await h.post(JSON.stringify(t))).json()['code']).toBe('E902');
    void h.sim.refuseConnections(0);
    await refusing;
    const ok = await h.post(JSON.stringify(t));
    expect([ok.status, ok.json()['code']]).toEqual([200, '0000']);
    expect(h.sim.guidStats(String(t['guid']))).toMatchObject({ calls: 1, applied: 1 });
    expect((await h.get(`/v1/transfers/${String(t['guid'])}`)).json()).toMatchObject({ status: 'DONE', attempts: 2 });
  });

  it('25 concurrent duplicates → one account call; the others get E903 at once or the replay', async () => {
    const h = await harness(tmp(), { sim: { latencyMs: 300 } });
    const t = JSON.stringify(transfer());
    const order: string[] = [];
    const replies = await Promise.all(Array.from({ length: 25 }, async () => {
      const r = await h.post(t);
      order.push(r.headers['idempotent-replayed'] === 'true' ? 'replay' : String(r.json()['code']));
      return r;
    }));
    const codes = replies.map((r) => String(r.json()['code']));
    expect(codes.every((c) => c === '0000' || c === 'E903')).toBe(true);
    expect(replies.filter((r) => r.status === 409).length).toBe(codes.filter((c) => c === 'E903').length);
    expect(h.sim.stats().totalCalls).toBe(1);
    // One reply carries the call's answer; every E903 came before it (at once, not after waiting for the call).
    expect(order.filter((c) => c === '0000')).toHaveLength(1);
    expect(order.slice(order.indexOf('0000')).includes('E903')).toBe(false);
  });

  it('E903 is answered at once while the first call is in flight', async () => {
    const h = await harness(tmp(), { sim: { latencyMs: 700 } });
    const tr = transfer();
    const t = JSON.stringify(tr);
    let firstAnswered = false;
    const first = h.post(t).finally(() => (firstAnswered = true));
    await waitFor(() => h.sim.guidStats(String(tr['guid'])).calls === 1, { what: 'the first call in flight' });
    const dup = await h.post(t);
    expect([dup.status, dup.json()['code']]).toEqual([409, 'E903']);
    // At once: answered while the first call was still waiting for the account system.
    expect(firstAnswered).toBe(false);
    expect((await first).json()['code']).toBe('0000');
  });

  it('E904: the same GUID with another request changes nothing and sends nothing', async () => {
    const h = await harness(tmp());
    const t = transfer();
    const first = await h.post(JSON.stringify(t));
    const other = await h.post(JSON.stringify({ ...t, amount: 101 }));
    expect([other.status, other.json()['code'], other.json()['guid']]).toEqual([422, 'E904', t['guid']]);
    const noCurrency = await h.post(JSON.stringify({ ...t, currency: undefined }));
    expect(noCurrency.json()['code']).toBe('E904');
    expect((await h.post(JSON.stringify(t))).body).toBe(first.body);
    expect(h.sim.stats().totalCalls).toBe(1);
  });

  it('E905: a purged GUID says it expired and what its code was', async () => {
    const h = await harness(tmp());
    const t = transfer();
    await h.post(JSON.stringify(t));
    const store = openLedger(h.db);
    expect((await orThrow(store.execute(String(t['guid']), { type: 'Purge', retentionMs: 0 }))).kind).toBe('applied');
    await store.close();
    const r = await h.post(JSON.stringify(t));
    expect([r.status, r.json()['code'], r.json()['originalCode']]).toEqual([410, 'E905', '0000']);
    expect(h.sim.stats().totalCalls).toBe(1);
  });

  it('the GUID may come in the Idempotency-Key header: "guid":"…", is inserted after the opening brace', async () => {
    const h = await harness(tmp());
    const raw = ' {"from":"ACC-1001","to":"ACC-2002","amount":5}';
    const r = await h.post(raw, { 'idempotency-key': 'HDR-1' });
    expect(r.json()).toMatchObject({ code: '0000', guid: 'HDR-1' });
    const store = openLedger(h.db);
    expect((await orThrow(store.getLedger('HDR-1')))?.request).toBe(' {"guid":"HDR-1","from":"ACC-1001","to":"ACC-2002","amount":5}');
    await store.close();
    // The same transfer with the GUID in the body is the same request.
    const same = await h.post('{"guid":"HDR-1","from":"ACC-1001","to":"ACC-2002","amount":5}', { 'idempotency-key': 'HDR-1' });
    expect(same.headers['idempotent-replayed']).toBe('true');
    const mismatch = await h.post('{"guid":"HDR-2","from":"ACC-1001","to":"ACC-2002","amount":5}', { 'idempotency-key': 'HDR-1' });
    expect([mismatch.status, mismatch.json()['code'], mismatch.json()['field']]).toEqual([400, 'E400', 'Idempotency-Key']);
    expect(h.sim.stats().totalCalls).toBe(1);
  });

  it.each([
    ['malformed JSON', '{"guid":', 'body'],
    ['not an object', '[1,2]', 'body'],
    ['missing guid', '{"from":"A1","to":"B2","amount":1}', 'guid'],
    ['bad guid', '{"guid":"-bad","from":"A1","to":"B2","amount":1}', 'guid'],
    ['missing from', '{"guid":"g1","to":"B2","amount":1}', 'from'],
    ['long account', `{"guid":"g1","from":"${'A'.repeat(35)}","to":"B2","amount":1}`, 'from'],
    ['from = to', '{"guid":"g1","from":"A1","to":"A1","amount":1}', 'to'],
    ['amount zero', '{"guid":"g1","from":"A1","to":"B2","amount":0}', 'amount'],
    ['amount fractional', '{"guid":"g1","from":"A1","to":"B2","amount":1.5}', 'amount'],
    ['amount unsafe', '{"guid":"g1","from":"A1","to":"B2","amount":9007199254740993}', 'amount'],
    ['amount string', '{"guid":"g1","from":"A1","to":"B2","amount":"1"}', 'amount'],
    ['currency lowercase', '{"guid":"g1","from":"A1","to":"B2","amount":1,"currency":"cny"}', 'currency'],
    ['empty body', '', 'body'],
    ['guid twice (JSON.parse keeps the last; an account system may keep the first)', '{"guid":"g1","from":"A1","to":"B2","amount":1,"guid":"g2"}', 'guid'],
    ['amount twice, one spelled with an escape', '{"guid":"g1","from":"A1","to":"B2","amount":1,"\\u0061mount":100000}', 'amount'],
  ])('E400 for %s, naming the field, storing nothing', async (_name, body, field) => {
    const h = await harness(tmp());
    const r = await h.post(body);
    expect([r.status, r.json()['code'], r.json()['field']]).toEqual([400, 'E400', field]);
    expect(String(r.json()['message'])).toContain(field === 'body' ? 'body' : field);
    expect(ledgerRowCount(h.db)).toBe(0);
    expect(h.sim.stats().totalCalls).toBe(0);
  });

  it('E400 for a body that is not UTF-8, and 413 for one over 64 KiB', async () => {
    const h = await harness(tmp());
    const bad = Buffer.concat([Buffer.from('{"guid":"g1","from":"A1","to":"B2","amount":1,"m":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
    const r = await h.post(bad);
    expect([r.status, r.json()['code'], r.json()['field']]).toEqual([400, 'E400', 'body']);
    expect(String(r.json()['message'])).toMatch(/UTF-8/);
    const big = JSON.stringify({ ...transfer(), pad: 'x'.repeat(70 * 1024) });
    const r2 = await h.post(big);
    expect([r2.status, r2.json()['code']]).toEqual([413, 'E400']);
    expect(ledgerRowCount(h.db)).toBe(0);
    expect(h.sim.stats().totalCalls).toBe(0);
  });

  it('E503 when the ledger is locked past the busy timeout: the account system is not called', async () => {
    const h = await harness(tmp(), { relay: { busyTimeoutMs: 200 } });
    const locker = new Database(h.db);
    locker.exec('BEGIN EXCLUSIVE');
    try {
      const r = await h.post(JSON.stringify(transfer()));
      expect([r.status, r.json()['code']]).toEqual([503, 'E503']);
      expect(h.sim.stats().totalCalls).toBe(0);
    } finally {
      locker.exec('ROLLBACK');
      locker.close();
    }
    expect(ledgerRowCount(h.db)).toBe(0);
    const ok = await h.post(JSON.stringify(transfer()));
    expect(ok.json()['code']).toBe('0000');
  });

  it('GET /v1/transfers/:guid, /healthz, /metrics, and unknown routes', async () => {
    const h = await harness(tmp());
    const t = transfer();
    await h.post(JSON.stringify(t));
    const row = (await h.get(`/v1/transfers/${String(t['guid'])}`)).json();
    expect(row).toMatchObject({ guid: t['guid'], status: 'DONE', code: '0000', attempts: 1 });
    expect(typeof row['createdAt']).toBe('number');
    expect(typeof row['updatedAt']).toBe('number');
    const missing = await h.get('/v1/transfers/NOPE-1');
    expect([missing.status, missing.json()['code']]).toEqual([404, 'E404']);
    expect((await h.get('/healthz')).status).toBe(200);
    const metrics = (await h.get('/metrics')).body;
    expect(metrics).toContain('guidgate_replies_total{code="0000",route="channel"} 1');
    expect(metrics).toContain('guidgate_account_calls_total{outcome="definite"} 1');
    expect(metrics).toContain('guidgate_ledger_rows{status="DONE"} 1');
    expect(metrics).toContain('guidgate_oldest_row_age_seconds{status="UNKNOWN"} 0');
    expect(metrics).toContain('guidgate_account_call_duration_seconds_bucket');
    // Every inquiry outcome from the start, before the first inquiry (#28): an alert on rate() sees the series.
    for (const outcome of ['processed', 'absent', 'unknown', 'unreachable']) expect(metrics).toContain(`guidgate_inquiries_total{outcome="${outcome}"} 0`);
    // prom-client's process and Node.js metrics.
    expect(metrics).toMatch(/^process_cpu_user_seconds_total \d/m);
    expect(metrics).toMatch(/^process_resident_memory_bytes \d/m);
    expect(metrics).toMatch(/^nodejs_eventloop_lag_seconds \d/m);
    expect(metrics).toMatch(/^nodejs_heap_size_used_bytes \d/m);
    const nowhere = await h.get('/nowhere');
    expect([nowhere.status, nowhere.json()['code']]).toEqual([404, 'E404']);
  });

  it('every reply code the relay can give is in the registry', () => {
    expect(Object.keys(REPLY_CODES).sort()).toEqual(['E400', 'E401', 'E403', 'E404', 'E409', 'E503', 'E901', 'E902', 'E903', 'E904', 'E905']);
  });
});
