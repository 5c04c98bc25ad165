import { connect } from 'node:net';
import { join } from 'node:path';
import { Agent, Client, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

const agent = useCleanup('file').use(new Agent({ connections: 64 }));
const cleanup = useCleanup();
const tmp = useTempDir();

const sim = async (opts: SimulatorOptions = {}): Promise<Simulator> => cleanup.use(await startSimulator({ port: 0, ...opts }));

interface Res {
  status: number;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

async function call(
  url: string,
  method: 'GET' | 'POST' | 'DELETE',
  body?: string,
  timeoutMs = 5000,
): Promise<Res> {
  const res = await request(url, {
    method,
    dispatcher: agent,
    // a fresh connection per call, so resets and refusals never poison a pooled one
    reset: true,
    // the client gives up after timeoutMs (undici's own headersTimeout only has ~1 s resolution)
    signal: AbortSignal.timeout(timeoutMs),
    ...(body === undefined ? {} : { body, headers: { 'content-type': 'application/json' } }),
  });
  return { status: res.statusCode, text: await res.body.text(), headers: res.headers };
}

const transfer = (guid: string, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ guid, from: 'ACC-A', to: 'ACC-B', amount: 250, currency: 'CNY', ...extra });
const post = (s: Simulator, body: string, timeout = 5000): Promise<Res> =>
  call(`${s.url}/transfer`, 'POST', body, timeout);
const inquire = (s: Simulator, guid: string): Promise<Res> =>
  call(`${s.url}/transfer/${encodeURIComponent(guid)}`, 'GET');
const json = (r: Res): Record<string, unknown> => JSON.parse(r.text) as Record<string, unknown>;

interface CallError {
  code: string | undefined;
  causeCode: string | undefined;
  name: string | undefined;
}
async function errorOf(p: Promise<unknown>): Promise<CallError> {
  try {
    await p;
  } catch (e) {
    const err = e as { code?: unknown; name?: string; cause?: { code?: string } };
    return { code: typeof err.code === 'string' ? err.code : undefined, causeCode: err.cause?.code, name: err.name };
  }
  throw new Error('expected the call to fail');
}

function connectOutcome(port: number): Promise<string> {
  return new Promise((resolve) => {
    const sock = connect({ port, host: '127.0.0.1' });
    sock.once('connect', () => {
      sock.destroy();
      resolve('connected');
    });
    sock.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });
}

describe('simulator: the account system is NOT idempotent', () => {
  it('applies the same GUID twice: two answers, two debits, stats show it', async () => {
    const s = await sim({ initialBalance: 10_000 });
    const a = await post(s, transfer('dup-1'));
    const b = await post(s, transfer('dup-1'));
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    const ja = json(a);
    const jb = json(b);
    expect(ja).toMatchObject({ guid: 'dup-1', code: '0000', message: 'transfer done', fromBalance: 9_750 });
    expect(jb).toMatchObject({ guid: 'dup-1', code: '0000', fromBalance: 9_500 });
    expect(ja['txId']).not.toBe(jb['txId']);
    expect(s.balance('ACC-A')).toBe(9_500);
    expect(s.balance('ACC-B')).toBe(10_500);

    const stats = s.stats();
    expect(stats).toEqual({
      totalCalls: 2,
      totalApplied: 2,
      calls: { 'dup-1': 2 },
      applied: { 'dup-1': 2 },
      doubleApplied: ['dup-1'],
      moneyMoved: 500,
    });
    expect(json(await call(`${s.url}/stats`, 'GET'))).toEqual(stats);
    expect(json(await call(`${s.url}/stats/dup-1`, 'GET'))).toEqual({ guid: 'dup-1', calls: 2, applied: 2 });
    expect(json(await call(`${s.url}/stats/never`, 'GET'))).toEqual({ guid: 'never', calls: 0, applied: 0 });
    expect(json(await call(`${s.url}/accounts/ACC-A`, 'GET'))).toEqual({ id: 'ACC-A', balance: 9_500 });
    expect(json(await call(`${s.url}/accounts/fresh`, 'GET'))).toEqual({ id: 'fresh', balance: 10_000 });
    expect((await call(`${s.url}/accounts/X9`, 'GET')).status).toBe(404);
  });

  it('B201 insufficient funds moves no money; B202 for X… accounts', async () => {
    const s = await sim({ initialBalance: 1_000 });
    const r1 = await post(s, transfer('poor-1', { amount: 1_001 }));
    expect(r1.status).toBe(200);
    expect(json(r1)).toMatchObject({ guid: 'poor-1', code: 'B201', fromBalance: 1_000 });
    const r2 = await post(s, transfer('unk-1', { from: 'XDEAD' }));
    expect(json(r2)).toMatchObject({ guid: 'unk-1', code: 'B202' });
    const r3 = await post(s, transfer('unk-2', { to: 'Xnope' }));
    expect(json(r3)).toMatchObject({ guid: 'unk-2', code: 'B202' });
    expect(s.balance('ACC-A')).toBe(1_000);
    expect(s.balance('ACC-B')).toBe(1_000);
    const st = s.stats();
    expect(st.totalApplied).toBe(0);
    expect(st.moneyMoved).toBe(0);
    expect(st.calls).toEqual({ 'poor-1': 1, 'unk-1': 1, 'unk-2': 1 });
    // a business rejection is a processed answer: the inquiry returns it
    const q = await inquire(s, 'poor-1');
    expect(q.status).toBe(200);
    expect(q.text).toBe(r1.text);
  });

  it('answers E400 (HTTP 400) for bad bodies, naming the field, and applies nothing', async () => {
    const s = await sim();
    const cases: [string, string][] = [
      ['{not json', 'JSON'],
      ['[1,2]', 'object'],
      [JSON.stringify({ from: 'A', to: 'B', amount: 1 }), 'guid'],
      [JSON.stringify({ guid: 'bad-1', to: 'B', amount: 1 }), 'from'],
      [JSON.stringify({ guid: 'bad-2', from: 'A', to: 'A', amount: 1 }), 'to'],
      [JSON.stringify({ guid: 'bad-3', from: 'A', to: 'B', amount: 0 }), 'amount'],
      [JSON.stringify({ guid: 'bad-4', from: 'A', to: 'B', amount: 1.5 }), 'amount'],
      [JSON.stringify({ guid: 'bad-5', from: 'A', to: 'B', amount: 1, currency: 'cny' }), 'currency'],
    ];
    for (const [body, field] of cases) {
      const r = await post(s, body);
      expect(r.status, body).toBe(400);
      const j = json(r);
      expect(j['code']).toBe('E400');
      expect(String(j['message'])).toContain(field);
    }
    const empty = await call(`${s.url}/transfer`, 'POST');
    expect(empty.status).toBe(400);
    const st = s.stats();
    expect(st.totalCalls).toBe(cases.length + 1);
    expect(st.totalApplied).toBe(0);
    expect(st.calls['bad-3']).toBe(1);
  });

  it('forwards and ignores unknown fields', async () => {
    const s = await sim();
    const r = await post(s, transfer('extra-1', { memo: { deep: [1, 2] } }));
    expect(json(r)['code']).toBe('0000');
  });
});

describe('simulator: inquiry', () => {
  it('returns the first answer byte for byte; 404 E404 for an unknown GUID', async () => {
    const s = await sim();
    const guid = 'inq:1.a-b';
    const first = await post(s, transfer(guid));
    const second = await post(s, transfer(guid));
    expect(second.text).not.toBe(first.text);
    const q = await inquire(s, guid);
    expect(q.status).toBe(200);
    expect(q.text).toBe(first.text);
    const none = await inquire(s, 'never-seen');
    expect(none.status).toBe(404);
    expect(json(none)['code']).toBe('E404');
  });

  it('accepts a 128-character GUID on both paths', async () => {
    const s = await sim();
    const guid = `g${'x'.repeat(127)}`;
    const r = await post(s, transfer(guid));
    expect(r.status).toBe(200);
    expect((await inquire(s, guid)).text).toBe(r.text);
  });

  it('processingMs: an applied GUID is invisible to inquiry for a while (the min-age trap)', async () => {
    const s = await sim({ faults: { processingMs: 400 } });
    const r = await post(s, transfer('trap-1'));
    expect(json(r)['code']).toBe('0000');
    expect(s.guidStats('trap-1').applied).toBe(1);
    const early = await inquire(s, 'trap-1');
    expect(early.status).toBe(404);
    const late = await waitFor(async () => {
      const q = await inquire(s, 'trap-1');
      return q.status === 404 ? null : q;
    }, { what: 'the applied GUID visible to inquiry' });
    expect(late.status).toBe(200);
    expect(late.text).toBe(r.text);
  });
});

describe('simulator: latency and fault modes', () => {
  it('latencyMs: waits before applying and answering', async () => {
    const s = await sim({ latencyMs: 300 });
    const p = post(s, transfer('slow-1'));
    await waitFor(() => s.guidStats('slow-1').calls === 1, { what: 'the call received' });
    expect(s.guidStats('slow-1')).toEqual({ guid: 'slow-1', calls: 1, applied: 0 });
    const r = await p;
    expect(json(r)['code']).toBe('0000');
    expect(s.guidStats('slow-1').applied).toBe(1);
  });

  it('latencyMs: a client that gives up during the wait still gets its transfer applied', async () => {
    const s = await sim({ latencyMs: 300 });
    const e = await errorOf(post(s, transfer('gaveup-1'), 100));
    expect(e.name).toBe('TimeoutError');
    expect(s.guidStats('gaveup-1').applied).toBe(0);
    await waitFor(() => s.guidStats('gaveup-1').applied === 1, { what: 'the transfer applied after the wait' });
  });

  it('reset: applies, then breaks the connection without an answer', async () => {
    const s = await sim();
    s.setFaults({ byGuid: { 'rst-1': 'reset' } });
    const e = await errorOf(post(s, transfer('rst-1')));
    expect([e.code, e.causeCode]).toEqual(expect.arrayContaining([expect.stringMatching(/ECONNRESET|UND_ERR_SOCKET/)]));
    expect(s.guidStats('rst-1')).toEqual({ guid: 'rst-1', calls: 1, applied: 1 });
    const q = await inquire(s, 'rst-1');
    expect(q.status).toBe(200);
    expect(json(q)['code']).toBe('0000');
    // other GUIDs are unaffected
    expect(json(await post(s, transfer('ok-1')))['code']).toBe('0000');
  });

  it('hold: never answers, never applies; close() still finishes', async () => {
    const s = await sim();
    const ctl = await call(`${s.url}/control/faults`, 'POST', JSON.stringify({ mode: 'hold' }));
    expect(ctl.status).toBe(200);
    expect(json(ctl)['mode']).toBe('hold');
    const e = await errorOf(post(s, transfer('hold-1'), 300));
    expect(e.name).toBe('TimeoutError');
    expect(s.guidStats('hold-1')).toEqual({ guid: 'hold-1', calls: 1, applied: 0 });
    expect((await inquire(s, 'hold-1')).status).toBe(404);

    // a held call still open when the simulator closes
    const pending = errorOf(post(s, transfer('hold-2'), 30_000));
    await waitFor(() => s.guidStats('hold-2').calls === 1, { what: 'the second call held' });
    await s.close();
    const e2 = await pending;
    expect(e2.name).not.toBe('TimeoutError');
  });

  it('late-answer: applied at once, answered after lateMs', async () => {
    const s = await sim({ faults: { byGuidPrefix: { 'late-': 'late-answer' }, lateMs: 500 } });
    let answered = false;
    const p = post(s, transfer('late-1')).finally(() => (answered = true));
    await waitFor(() => s.guidStats('late-1').applied === 1, { what: 'late-1 applied' });
    const q = await inquire(s, 'late-1');
    expect(q.status).toBe(200);
    // Applied and visible to inquiry, yet the POST still has no answer.
    expect(answered).toBe(false);
    const r = await p;
    expect(r.status).toBe(200);
    expect(r.text).toBe(q.text);
    expect(s.guidStats('late-1').applied).toBe(1);
  });

  it('garbage: HTTP 502 with a non-JSON body, nothing applied', async () => {
    const s = await sim({ faults: { mode: 'garbage' } });
    const r = await post(s, transfer('gb-1'));
    expect(r.status).toBe(502);
    expect(() => JSON.parse(r.text)).toThrow();
    expect(s.guidStats('gb-1')).toEqual({ guid: 'gb-1', calls: 1, applied: 0 });
    expect((await inquire(s, 'gb-1')).status).toBe(404);
  });

  it('e500: HTTP 200 code E500, nothing applied, nothing to inquire', async () => {
    const s = await sim();
    s.setFaults({ mode: 'e500' });
    const r = await post(s, transfer('e5-1'));
    expect(r.status).toBe(200);
    expect(json(r)).toMatchObject({ guid: 'e5-1', code: 'E500' });
    expect(s.guidStats('e5-1')).toEqual({ guid: 'e5-1', calls: 1, applied: 0 });
    expect((await inquire(s, 'e5-1')).status).toBe(404);
    expect(s.balance('ACC-A')).toBe(1_000_000_000_000);
  });

  it('overrides: exact GUID beats prefix, longest prefix wins; DELETE resets to normal', async () => {
    const s = await sim();
    s.setFaults({ mode: 'garbage', byGuidPrefix: { p: 'e500', 'p-ok': 'answer' }, byGuid: { 'p-ok-but-e500': 'e500' } });
    expect((await post(s, transfer('z-1'))).status).toBe(502);
    expect(json(await post(s, transfer('p-1')))['code']).toBe('E500');
    expect(json(await post(s, transfer('p-ok-1')))['code']).toBe('0000');
    expect(json(await post(s, transfer('p-ok-but-e500')))['code']).toBe('E500');
    const del = await call(`${s.url}/control/faults`, 'DELETE');
    expect(json(del)).toMatchObject({ mode: 'answer', byGuid: {}, byGuidPrefix: {}, e500Rate: 0 });
    expect(json(await post(s, transfer('p-2')))['code']).toBe('0000');
  });

  it('e500Rate: a seeded fraction of normal POSTs answers E500 without applying, reproducibly', async () => {
    const codesOf = async (s: Simulator): Promise<string[]> => {
      const codes: string[] = [];
      for (let i = 0; i < 40; i++) codes.push(String(json(await post(s, transfer(`rate-${i}`)))['code']));
      return codes;
    };
    const s1 = await sim({ faults: { e500Rate: 0.5, seed: 42 } });
    const c1 = await codesOf(s1);
    const e500s = c1.filter((c) => c === 'E500').length;
    expect(e500s).toBeGreaterThan(5);
    expect(e500s).toBeLessThan(35);
    expect(c1.every((c) => c === 'E500' || c === '0000')).toBe(true);
    expect(s1.stats().totalApplied).toBe(40 - e500s);
    const s2 = await sim();
    await call(`${s2.url}/control/faults`, 'POST', JSON.stringify({ e500Rate: 0.5, seed: 42 }));
    expect(await codesOf(s2)).toEqual(c1);
  });
});

describe('simulator: control', () => {
  it('rejects a bad control body with 400 naming the field, and changes nothing', async () => {
    const s = await sim();
    const bad: [string, string][] = [
      [JSON.stringify({ mode: 'explode' }), 'mode'],
      [JSON.stringify({ byGuid: { g1: 'nope' } }), 'byGuid.g1'],
      [JSON.stringify({ e500Rate: 2 }), 'e500Rate'],
      [JSON.stringify({ lateMs: -5 }), 'lateMs'],
      [JSON.stringify({ latMs: 5 }), 'latMs'],
      ['{oops', '(body)'],
    ];
    for (const [body, field] of bad) {
      const r = await call(`${s.url}/control/faults`, 'POST', body);
      expect(r.status, body).toBe(400);
      expect(json(r)).toMatchObject({ code: 'E400', field });
    }
    expect(json(await call(`${s.url}/control/faults`, 'GET', undefined))).toMatchObject({ mode: 'answer', lateMs: 10_000 });
    expect(() => s.setFaults({ e500Rate: -1 })).toThrow(/e500Rate/);
  });

  it('refuseForMs: answers the control call, refuses connections for the window, then listens on the same port', async () => {
    const s = await sim();
    expect(json(await post(s, transfer('before-1')))['code']).toBe('0000');
    const ctl = await call(`${s.url}/control/faults`, 'POST', JSON.stringify({ refuseForMs: 600 }));
    expect(ctl.status).toBe(200);
    // The window starts once the control call's answer has gone out.
    await waitFor(async () => (await connectOutcome(s.port)) === 'ECONNREFUSED', { what: 'connections refused' });
    const e = await errorOf(post(s, transfer('during-1')));
    expect([e.code, e.causeCode]).toContain('ECONNREFUSED');
    expect(s.guidStats('during-1').calls).toBe(0);
    await waitFor(async () => (await connectOutcome(s.port)) === 'connected', { what: 'listening again after the window' });
    expect(json(await post(s, transfer('after-1')))['code']).toBe('0000');
    expect(s.stats().totalCalls).toBe(2);
  });

  it('refuseConnections(ms) resolves once listening again; a held call survives the window', async () => {
    const s = await sim({ faults: { byGuid: { 'held-x': 'hold' } } });
    const held = errorOf(post(s, transfer('held-x'), 1_500));
    await waitFor(() => s.guidStats('held-x').calls === 1, { what: 'the held call received' });
    let listening = false;
    const back = s.refuseConnections(300).then(() => (listening = true));
    await waitFor(async () => (await connectOutcome(s.port)) === 'ECONNREFUSED', { what: 'connections refused' });
    expect(listening).toBe(false);
    await back;
    expect(await connectOutcome(s.port)).toBe('connected');
    // the held connection was not cut by the refusal: it ends by the client's own timeout
    expect((await held).name).toBe('TimeoutError');
  });

  it('an answer sent during a refusal window closes its connection, so a keep-alive client is refused next', async () => {
    const s = await sim({ latencyMs: 200 });
    const client = new Client(s.url, { pipelining: 1 });
    try {
      const send = (guid: string) =>
        client.request({ path: '/transfer', method: 'POST', body: transfer(guid), headers: { 'content-type': 'application/json' } });
      const inFlight = send('ka-1');
      await waitFor(() => s.guidStats('ka-1').calls === 1, { what: 'ka-1 in flight' });
      void s.refuseConnections(1_000);
      const r1 = await inFlight;
      expect(r1.statusCode).toBe(200);
      expect(r1.headers['connection']).toBe('close');
      expect((JSON.parse(await r1.body.text()) as { code: string }).code).toBe('0000');
      const e = await errorOf(send('ka-2'));
      expect([e.code, e.causeCode]).toContain('ECONNREFUSED');
      expect(s.stats().calls).toEqual({ 'ka-1': 1 });
    } finally {
      await client.destroy();
    }
  });

  it('close() during a refusal window finishes', async () => {
    const s = await sim();
    // A window far longer than the test may take: close() must end it, not wait it out.
    const windowOver = s.refuseConnections(600_000);
    await waitFor(async () => (await connectOutcome(s.port)) === 'ECONNREFUSED', { what: 'connections refused' });
    await s.close();
    await windowOver;
    expect(await connectOutcome(s.port)).toBe('ECONNREFUSED');
  });
});

describe('simulator: persistence', () => {
  it('keeps accounts, applications, answers and call counts across a restart', async () => {
    const dbPath = join(tmp(), 'nested', 'sim.db');
    const s1 = await startSimulator({ port: 0, dbPath, initialBalance: 5_000 });
    const first = await post(s1, transfer('p-1'));
    await post(s1, transfer('p-1'));
    await post(s1, transfer('p-2', { amount: 99_999 })); // B201
    const before = s1.stats();
    await s1.close();

    const s2 = await sim({ dbPath, initialBalance: 5_000 });
    expect(s2.stats()).toEqual(before);
    expect(before).toMatchObject({ totalCalls: 3, totalApplied: 2, doubleApplied: ['p-1'], moneyMoved: 500 });
    expect(s2.balance('ACC-A')).toBe(4_500);
    const q = await inquire(s2, 'p-1');
    expect(q.status).toBe(200);
    expect(q.text).toBe(first.text);
    const again = await post(s2, transfer('p-1'));
    expect(json(again)['fromBalance']).toBe(4_250);
    expect(s2.guidStats('p-1')).toEqual({ guid: 'p-1', calls: 3, applied: 3 });
  });
});
