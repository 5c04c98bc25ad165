import { rmSync } from 'node:fs';
import { join } from 'node:path';
import * as ajvModule from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import { describe, it, expect, beforeAll } from 'vitest';
import { httpRequest, makeKeys, startHarness, transfer, type Harness, type HttpReply } from '../support/relayHarness.js';
import { waitFor } from '../support/waitFor.js';
import { noConnectionLeft } from '../support/tcpStates.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { orThrow } from '../../src/events/storeResult.js';
import { openLedger } from '../support/ledgerStore.js';
import { runOver, sentRecord } from '../support/reconcile.js';

/** serve's --min-age in these tests: short, so a row becomes old enough while a test waits; still a floor for minAge. */
const MIN_AGE_MS = 2000;

/** A JSON Schema 2020-12 validator (ajv ships with fastify); its CommonJS default export, whichever way it comes. */
const Ajv2020 = ((ajvModule as unknown as { default: { default?: unknown } }).default.default ?? (ajvModule as unknown as { default: unknown }).default) as new (o: object) => {
  compile(schema: object): ValidateFunction;
};

interface Operation {
  responses: Record<string, { content?: Record<string, { schema: object }> }>;
  'x-example': { params?: Record<string, string>; query?: Record<string, string>; body?: unknown };
  'x-scope': string;
}
type Doc = { openapi: string; paths: Record<string, Record<string, Operation>> };

/**
 * The operator API over real HTTP: a real `serve` with keys on, a real ledger file, the simulator as the account
 * system. Every reply a test gets is checked against `/openapi.json` (its status documented, its body valid
 * against the documented schema).
 */
describe('operator API', () => {
  let h: Harness;
  let dir: string;
  let doc: Doc;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const validators = new Map<object, ValidateFunction>();
  const tokens: Record<string, string> = {};
  const tmp = useTempDir('file');
  const cleanup = useCleanup('file');

  beforeAll(async () => {
    dir = tmp();
    const keys = makeKeys(join(dir, 'keys'), { pay: ['transfer'], reader: ['read'], ops: ['admin'], console: ['read', 'admin'], all: ['transfer', 'read', 'admin'] });
    Object.assign(tokens, keys.tokens);
    h = cleanup.use(await startHarness(dir, {
      // `hold`: never applied, never answered (UNKNOWN, then absent); `late-answer`: applied, answered too late (UNKNOWN, then processed).
      sim: { faults: { byGuidPrefix: { 'hole-': 'hold', 'late-': 'late-answer' }, lateMs: 2000 } },
      // No background settling: only the API under test moves rows.
      relay: { keys: keys.ring, timeoutMs: 300, settleEveryMs: 0, minAgeMs: MIN_AGE_MS },
    }));
    const r = await httpRequest(`${h.relay.url}/openapi.json`, { method: 'GET' });
    expect(r.status).toBe(200);
    doc = r.json() as unknown as Doc;
  });

  /** Fails unless the reply's status is documented for this operation and its body is valid against the documented schema. */
  const conforms = (method: string, template: string, r: HttpReply): void => {
    const op = doc.paths[template]?.[method.toLowerCase()];
    expect(op, `${method} ${template} is documented`).toBeDefined();
    const documented = op!.responses[String(r.status)];
    expect(documented, `${method} ${template}: ${r.status} is documented (${r.body.slice(0, 200)})`).toBeDefined();
    const content = documented!.content;
    if (content?.['application/json'] === undefined) return;
    const schema = content['application/json'].schema;
    let validate = validators.get(schema);
    if (validate === undefined) validators.set(schema, (validate = ajv.compile(schema)));
    expect(validate(JSON.parse(r.body)), `${method} ${template} ${r.status}: ${JSON.stringify(validate.errors)} in ${r.body.slice(0, 300)}`).toBe(true);
  };

  const call = async (method: 'GET' | 'POST', template: string, opts: { token?: string | null; params?: Record<string, string>; query?: string; body?: unknown } = {}): Promise<HttpReply> => {
    const path = template.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(opts.params?.[name] ?? ''));
    const token = opts.token === undefined ? tokens['console']! : opts.token;
    const r = await httpRequest(`${h.relay.url}${path}${opts.query === undefined ? '' : `?${opts.query}`}`, {
      method,
      ...(opts.body === undefined ? {} : { body: typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body) }),
      headers: token === null ? {} : { authorization: `Bearer ${token}` },
    });
    conforms(method, template, r);
    return r;
  };
  const send = async (over: Record<string, unknown> = {}) => {
    const t = transfer(over);
    const r = await call('POST', '/v1/transfers', { token: tokens['pay']!, body: t });
    return { guid: String(t['guid']), reply: r };
  };
  const timeline = async (guid: string) => (await call('GET', '/v1/transfers/{guid}/events', { params: { guid } })).json();
  /**
   * What an action may change: the row and its events. The channel's request records are left out: the relay
   * writes them up to 50 ms after the reply, so one may land between two reads whatever the action did.
   */
  const state = async (guid: string) => {
    const t = await timeline(guid);
    return { row: t['row'], events: (t['timeline'] as { kind: string }[]).filter((e) => e.kind === 'event') };
  };
  /** A resolve's dry run (it changes nothing) polled until the row is old enough for serve's --min-age; that reply. */
  const oldEnoughToResolve = (guid: string) =>
    waitFor(async () => {
      const r = await call('POST', '/v1/transfers/{guid}/resolve', { params: { guid }, body: { dryRun: true } });
      return r.status === 409 && String(r.json()['message']).includes('younger than minAge') ? null : r;
    }, { timeoutMs: MIN_AGE_MS + 15_000, intervalMs: 100, what: `${guid} old enough to resolve` });
  /**
   * A GUID the account system never applied, old enough for serve's --min-age and in the state `action` works on:
   * UNKNOWN for resolve; FAILED by an inquiry (absent) for reprocess. Its prefix is held by the simulator.
   */
  const rowFor = async (action: 'resolve' | 'reprocess', prefix: string): Promise<string> => {
    await httpRequest(`${h.sim.url}/control/faults`, { method: 'POST', body: JSON.stringify({ byGuidPrefix: { [`${prefix}-`]: 'hold', 'late-': 'late-answer' } }) });
    const guid = `${prefix}-${action}-${process.pid}`;
    expect((await send({ guid })).reply.json()['code']).toBe('E901');
    await oldEnoughToResolve(guid);
    if (action === 'reprocess') expect((await call('POST', '/v1/transfers/{guid}/resolve', { params: { guid }, body: {} })).json()).toMatchObject({ outcome: 'absent' });
    return guid;
  };
  const simCalls = async (guid: string) => (await httpRequest(`${h.sim.url}/stats/${encodeURIComponent(guid)}`, { method: 'GET' })).json() as { calls: number; applied: number };

  it('/openapi.json is OpenAPI 3.1, public, and documents every operator and channel route with 401/403 where a scope is needed', async () => {
    const r = await httpRequest(`${h.relay.url}/openapi.json`, { method: 'GET' });
    expect(r.status).toBe(200);
    expect(doc.openapi).toBe('3.1.0');
    for (const [path, method] of [
      ['/v1/transfers', 'post'], ['/v1/transfers/{guid}', 'get'], ['/healthz', 'get'], ['/metrics', 'get'],
      ['/v1/transfers/{guid}/events', 'get'], ['/v1/ledger', 'get'], ['/v1/stats', 'get'],
      ['/v1/transfers/{guid}/resolve', 'post'], ['/v1/transfers/{guid}/reprocess', 'post'],
      ['/v1/reconciliations', 'get'], ['/v1/reconciliations/{id}', 'get'],
    ] as const) {
      const op = doc.paths[path]?.[method];
      expect(op, `${method} ${path}`).toBeDefined();
      if (op!['x-scope'] !== 'none') expect(Object.keys(op!.responses)).toEqual(expect.arrayContaining(['401', '403']));
    }
    expect(doc.paths['/v1/transfers/{guid}/resolve']!['post']!['x-scope']).toBe('admin');
    expect(doc.paths['/v1/ledger']!['get']!['x-scope']).toBe('read');
    expect(doc.paths['/v1/reconciliations/{id}']!['get']!['x-scope']).toBe('read');
    // The path, query and body schemas are the ones the routes validate with.
    const ledger = doc.paths['/v1/ledger']!['get'] as unknown as { parameters: { name: string; in: string }[] };
    expect(ledger.parameters.map((p) => `${p.in}:${p.name}`)).toEqual(['query:status', 'query:olderThan', 'query:limit', 'query:cursor']);
  });

  it('every documented example, sent as it is, gets a documented reply valid against its schema', async () => {
    // The channel POST first: the other examples name its GUID.
    const ordered = Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })));
    ordered.sort((a, b) => Number(b.method === 'post' && b.path === '/v1/transfers') - Number(a.method === 'post' && a.path === '/v1/transfers'));
    expect(ordered.length).toBeGreaterThanOrEqual(10);
    for (const { path, method, op } of ordered) {
      const ex = op['x-example'];
      const r = await call(method.toUpperCase() as 'GET' | 'POST', path, {
        token: tokens['all']!,
        ...(ex.params === undefined ? {} : { params: ex.params }),
        ...(ex.query === undefined ? {} : { query: new URLSearchParams(ex.query).toString() }),
        ...(ex.body === undefined ? {} : { body: ex.body }),
      });
      expect(r.status, `${method} ${path}: ${r.body.slice(0, 200)}`).toBeLessThan(500);
    }
  });

  describe('scopes (keys on)', () => {
    const routes = [
      { method: 'GET' as const, path: '/v1/transfers/{guid}/events', right: 'reader', wrong: 'ops' },
      { method: 'GET' as const, path: '/v1/ledger', right: 'reader', wrong: 'ops' },
      { method: 'GET' as const, path: '/v1/stats', right: 'reader', wrong: 'pay' },
      { method: 'GET' as const, path: '/v1/reconciliations', right: 'reader', wrong: 'ops' },
      { method: 'POST' as const, path: '/v1/transfers/{guid}/resolve', right: 'ops', wrong: 'reader' },
      { method: 'POST' as const, path: '/v1/transfers/{guid}/reprocess', right: 'ops', wrong: 'reader' },
    ];
    it.each(routes)('$method $path: no token 401, unknown token 401, $wrong 403, $right let through', async (route) => {
      const { guid } = await send();
      const at = (token: string | null) => call(route.method, route.path, { token, params: { guid }, ...(route.method === 'POST' ? { body: { dryRun: true } } : {}) });
      const none = await at(null);
      expect([none.status, none.json()['code'], none.headers['www-authenticate']]).toEqual([401, 'E401', 'Bearer']);
      expect((await at('not-a-token')).status).toBe(401);
      const wrong = await at(tokens[route.wrong]!);
      expect([wrong.status, wrong.json()['code']]).toEqual([403, 'E403']);
      expect(wrong.body).not.toContain(tokens[route.wrong]!);
      const right = await at(tokens[route.right]!);
      expect([401, 403]).not.toContain(right.status);
    });
    it('an action refused for its scope changed nothing and called nothing', async () => {
      const { guid } = await send({ guid: `hole-scope-${process.pid}` });
      const before = await state(guid);
      const r = await call('POST', '/v1/transfers/{guid}/resolve', { token: tokens['reader']!, params: { guid }, body: {} });
      expect(r.status).toBe(403);
      expect(await state(guid)).toEqual(before);
      expect((before['row'] as { status: string }).status).toBe('UNKNOWN');
    });
  });

  describe('GET /v1/transfers/{guid}/events', () => {
    it('the row and its events in order; request and response parsed, account numbers masked, no fingerprint', async () => {
      const { guid } = await send({ from: '6222021001777', to: '6222021002888', note: { from: '6222021001777' } });
      const r = await call('GET', '/v1/transfers/{guid}/events', { params: { guid } });
      expect(r.status).toBe(200);
      expect(r.body).not.toContain('6222021001777');
      expect(r.body).not.toContain('6222021002888');
      expect(r.body).not.toContain('fingerprint');
      const body = r.json() as { guid: string; row: Record<string, unknown>; timeline: { kind: string; seq: number; type: string; data: Record<string, unknown> }[] };
      expect(body.row).toMatchObject({ guid, status: 'DONE', code: '0000', attempts: 1, channel: 'pay' });
      // The channel's request record may have joined the timeline already (it is flushed off the request path).
      const events = body.timeline.filter((e) => e.kind === 'event');
      expect(events.map((e) => [e.kind, e.seq, e.type])).toEqual([['event', 0, 'Claimed'], ['event', 1, 'Sent'], ['event', 2, 'Answered']]);
      expect(events[0]!.data['request']).toMatchObject({ guid, from: '*********1777', to: '*********2888', amount: 100, note: { from: '*********1777' } });
      expect(events[2]!.data['response']).toMatchObject({ guid, code: '0000' });
    });
    it('an unknown GUID is E404; a malformed one E400 naming guid', async () => {
      const missing = await call('GET', '/v1/transfers/{guid}/events', { params: { guid: 'NO-SUCH-GUID' } });
      expect([missing.status, missing.json()['code']]).toEqual([404, 'E404']);
      const bad = await call('GET', '/v1/transfers/{guid}/events', { params: { guid: 'bad guid' } });
      expect([bad.status, bad.json()['code'], bad.json()['field']]).toEqual([400, 'E400', 'guid']);
    });
  });

  describe('GET /v1/ledger', () => {
    it('pages through every row in GUID order with the cursor, each once', async () => {
      for (let i = 0; i < 5; i++) await send();
      const all: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const r: HttpReply = await call('GET', '/v1/ledger', { query: `limit=2${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}` });
        expect(r.status).toBe(200);
        const page = r.json() as { rows: { guid: string }[]; nextCursor: string | null };
        expect(page.rows.length).toBeLessThanOrEqual(2);
        all.push(...page.rows.map((row) => row.guid));
        cursor = page.nextCursor;
        pages++;
      } while (cursor !== null && pages < 100);
      expect(all.length).toBeGreaterThanOrEqual(5);
      expect(new Set(all).size).toBe(all.length);
      expect([...all].sort()).toEqual(all);
      const whole = (await call('GET', '/v1/ledger', { query: 'limit=500' })).json() as { rows: { guid: string }[]; nextCursor: string | null };
      expect(whole.rows.map((row) => row.guid)).toEqual(all);
      expect(whole.nextCursor).toBeNull();
      expect(JSON.stringify(whole)).not.toMatch(/request|fingerprint|6222021001/);
    });
    it('filters by status (any case, comma-separated) and by age', async () => {
      const { guid } = await send({ guid: `hole-filter-${process.pid}` });
      const unknown = (await call('GET', '/v1/ledger', { query: 'status=unknown' })).json() as { rows: { guid: string; status: string }[] };
      expect(unknown.rows.map((r) => r.guid)).toContain(guid);
      expect(unknown.rows.every((r) => r.status === 'UNKNOWN')).toBe(true);
      const two = (await call('GET', '/v1/ledger', { query: 'status=UNKNOWN,FAILED' })).json() as { rows: { status: string }[] };
      expect(two.rows.every((r) => r.status === 'UNKNOWN' || r.status === 'FAILED')).toBe(true);
      const old = (await call('GET', '/v1/ledger', { query: 'olderThan=1h' })).json() as { rows: unknown[] };
      expect(old.rows).toEqual([]);
    });
    it.each([
      ['status=DONE,NOPE', 'status'],
      ['olderThan=30', 'olderThan'],
      ['limit=0', 'limit'],
      ['limit=501', 'limit'],
      ['limit=x', 'limit'],
      ['cursor=bad%20cursor', 'cursor'],
      ['sort=guid', 'sort'],
    ])('?%s is E400 naming %s', async (query, field) => {
      const r = await call('GET', '/v1/ledger', { query });
      expect([r.status, r.json()['code'], r.json()['field']]).toEqual([400, 'E400', field]);
    });
  });

  it('GET /v1/stats: counts per status, the oldest UNKNOWN row, the breaker, replies per code over the last minutes', async () => {
    await send({ guid: `hole-stats-${process.pid}` });
    const r = await call('GET', '/v1/stats', { token: tokens['reader']! });
    expect(r.status).toBe(200);
    const s = r.json() as { statuses: Record<string, { count: number }>; oldest: { UNKNOWN: { status: string } | null }; breaker: { state: string }; replies: { windowSeconds: number; perCode: Record<string, number> } };
    expect(s.statuses['UNKNOWN']!.count).toBeGreaterThanOrEqual(1);
    expect(s.oldest.UNKNOWN?.status).toBe('UNKNOWN');
    expect(s.breaker.state).toBe('closed');
    expect(s.replies.windowSeconds).toBe(300);
    expect(s.replies.perCode['E901']).toBeGreaterThanOrEqual(1);
    expect(s.replies.perCode['0000']).toBeGreaterThanOrEqual(1);
  });

  it('replies are counted by route: an operator E401 is no channel reply, and /v1/stats (the console) counts channel replies only', async () => {
    const counted = async (route: string) => {
      const text = (await call('GET', '/metrics', { token: tokens['reader']! })).body;
      return Number(new RegExp(`^guidgate_replies_total\\{code="E401",route="${route}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? '0');
    };
    const perCode = async () => ((await call('GET', '/v1/stats', { token: tokens['reader']! })).json() as { replies: { perCode: Record<string, number> } }).replies.perCode['E401'] ?? 0;
    const before = { operator: await counted('operator'), channel: await counted('channel'), stats: await perCode() };
    // A console without its token, twice; a channel without its token, once.
    for (let i = 0; i < 2; i++) expect((await call('GET', '/v1/stats', { token: null })).status).toBe(401);
    expect((await call('POST', '/v1/transfers', { token: null, body: transfer() })).status).toBe(401);
    expect({ operator: await counted('operator'), channel: await counted('channel'), stats: await perCode() }).toEqual({
      operator: before.operator + 2,
      channel: before.channel + 1,
      stats: before.stats + 1,
    });
  });

  describe('resolve and reprocess one GUID, against the simulator', () => {
    it('a GUID never applied: resolve (too young, dry run, then absent) and reprocess (dry run, held, then sent once): each step as the commands do it', async () => {
      const guid = `hole-1-${process.pid}`;
      const first = await send({ guid });
      expect(first.reply.json()['code']).toBe('E901');
      const unknown = await state(guid);

      // serve's min-age: too young to ask; 409 and nothing changed.
      const young = await call('POST', '/v1/transfers/{guid}/resolve', { params: { guid }, body: {} });
      expect([young.status, young.json()['code']]).toEqual([409, 'E409']);
      expect(String(young.json()['message'])).toContain(`younger than minAge (${MIN_AGE_MS} ms)`);
      expect(await state(guid)).toEqual(unknown);

      // Dry run, once old enough: the row listed, nothing asked, nothing changed.
      const dry = await oldEnoughToResolve(guid);
      expect(dry.status).toBe(200);
      expect(dry.json()).toMatchObject({ guid, dryRun: true, outcome: 'candidate', before: { status: 'UNKNOWN' }, after: { status: 'UNKNOWN' } });
      expect(await state(guid)).toEqual(unknown);
      expect((await simCalls(guid)).calls).toBe(1);

      const resolved = await call('POST', '/v1/transfers/{guid}/resolve', { params: { guid }, body: {} });
      expect(resolved.status).toBe(200);
      expect(resolved.json()).toMatchObject({ dryRun: false, outcome: 'absent', before: { status: 'UNKNOWN' }, after: { status: 'FAILED', code: 'E902' } });

      // Now FAILED: resolve no longer applies.
      expect((await call('POST', '/v1/transfers/{guid}/resolve', { params: { guid }, body: {} })).status).toBe(409);

      const failed = await state(guid);
      const dryReprocess = await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid }, body: { dryRun: true } });
      expect(dryReprocess.json()).toMatchObject({ dryRun: true, outcome: 'candidate', after: { status: 'FAILED' } });
      expect(await state(guid)).toEqual(failed);
      expect((await simCalls(guid)).calls).toBe(1);

      // FAILED by an inquiry: a minAge longer than serve's (more caution is allowed) holds it (inquiry before a resend, CONTRACT.md §7), nothing sent.
      const held = await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid }, body: { minAge: '1h' } });
      expect(held.json()).toMatchObject({ outcome: 'held', after: { status: 'FAILED' } });
      expect((await simCalls(guid)).calls).toBe(1);

      // The account system answers again: a fresh inquiry says absent, then the stored bytes are sent once.
      await httpRequest(`${h.sim.url}/control/faults`, { method: 'POST', body: JSON.stringify({ byGuidPrefix: { 'late-': 'late-answer' } }) });
      const sent = await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid }, body: {} });
      expect(sent.status).toBe(200);
      expect(sent.json()).toMatchObject({ outcome: 'done', detail: '0000', before: { status: 'FAILED', attempts: 1 }, after: { status: 'DONE', code: '0000', attempts: 2 } });
      expect(await simCalls(guid)).toMatchObject({ calls: 2, applied: 1 });
      const again = await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid }, body: {} });
      expect([again.status, again.json()['code']]).toEqual([409, 'E409']);
      expect(await simCalls(guid)).toMatchObject({ calls: 2, applied: 1 });
      const events = (await state(guid)).events as unknown as { type: string; actor: { by: string; key?: string; params?: Record<string, unknown> } | null }[];
      expect(events.map((e) => e.type)).toEqual(['Claimed', 'Sent', 'TimedOut', 'Resolved', 'Sent', 'Answered']);
      // The audit trail names the operator key that asked, with the parameters that decided it.
      expect(events[3]!.actor).toMatchObject({ by: 'serve', key: 'console', params: { minAgeMs: MIN_AGE_MS, inquiryStatus: 404 } });
      expect(events[4]!.actor).toMatchObject({ by: 'serve', key: 'console', params: { minAgeMs: MIN_AGE_MS } });
      expect(events[0]!.actor).toMatchObject({ by: 'serve', key: 'pay' });
    });

    it('a GUID applied but answered late: resolve finds it processed and stores the answer; nothing is sent again', async () => {
      const guid = `late-1-${process.pid}`;
      expect((await send({ guid })).reply.json()['code']).toBe('E901');
      expect((await oldEnoughToResolve(guid)).json()).toMatchObject({ outcome: 'candidate' });
      const r = await call('POST', '/v1/transfers/{guid}/resolve', { params: { guid }, body: {} });
      expect(r.json()).toMatchObject({ outcome: 'processed', detail: '0000', after: { status: 'DONE', code: '0000' } });
      expect(await simCalls(guid)).toMatchObject({ calls: 1, applied: 1 });
      expect((await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid }, body: {} })).status).toBe(409);
    });

    it('refused connections: reprocess counts a refusal as failed; at the attempt cap (a dead letter) it is E409 and nothing is sent', async () => {
      const capped = `cap-${process.pid}`;
      const once = `once-${process.pid}`;
      // Refusing until the E902s are seen, not for a window a loaded machine may overrun.
      const refusing = h.sim.refuseConnections(60_000);
      await noConnectionLeft(process.pid, h.sim.port); // the relay runs in this process
      try {
        for (let i = 0; i < 3; i++) expect((await send({ guid: capped })).reply.json()['code']).toBe('E902');
        expect((await send({ guid: once })).reply.json()['code']).toBe('E902');
        const refused = await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid: once }, body: {} });
        expect(refused.json()).toMatchObject({ outcome: 'failed', before: { status: 'FAILED', attempts: 1 }, after: { status: 'FAILED', attempts: 2 } });
      } finally {
        void h.sim.refuseConnections(0);
        await refusing;
      }
      const stats = (await call('GET', '/v1/stats')).json() as { deadLetters: { maxAttempts: number; count: number } };
      expect(stats.deadLetters).toEqual({ maxAttempts: 3, count: 1, command: expect.stringMatching(/^guidgate reprocess --db \S+ --account-url http:\/\/127\.0\.0\.1:\d+ .*--max-attempts 4$/) });
      const before = await state(capped);
      const r = await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid: capped }, body: {} });
      expect([r.status, r.json()['code']]).toEqual([409, 'E409']);
      expect(String(r.json()['message'])).toContain('attempt cap (3)');
      expect(await state(capped)).toEqual(before);
      expect(await simCalls(capped)).toMatchObject({ calls: 0, applied: 0 });
      // A refused connection never left: sent again at once, without an inquiry or a min-age.
      const sent = await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid: once }, body: {} });
      expect(sent.json()).toMatchObject({ outcome: 'done', after: { status: 'DONE', attempts: 3 } });
      expect(await simCalls(once)).toMatchObject({ calls: 1, applied: 1 });

      // The dead-letter runbook (#28): maxAttempts above serve's cap sends the named dead letter again, once, by the
      // same rule as the command (dry run first); a bad maxAttempts, or one given to resolve, is E400 naming it.
      for (const body of [{ maxAttempts: 0 }, { maxAttempts: '4' }, { maxAttempts: 4.5 }]) {
        const bad = await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid: capped }, body });
        expect([bad.status, bad.json()['code'], bad.json()['field']]).toEqual([400, 'E400', 'maxAttempts']);
      }
      const onResolve = await call('POST', '/v1/transfers/{guid}/resolve', { params: { guid: capped }, body: { maxAttempts: 4 } });
      expect([onResolve.status, onResolve.json()['field']]).toEqual([400, 'maxAttempts']);
      const dry = await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid: capped }, body: { dryRun: true, maxAttempts: 4 } });
      expect(dry.json()).toMatchObject({ dryRun: true, outcome: 'candidate', after: { status: 'FAILED', attempts: 3 } });
      expect(await state(capped)).toEqual(before);
      const raised = await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid: capped }, body: { maxAttempts: 4 } });
      expect(raised.json()).toMatchObject({ outcome: 'done', before: { status: 'FAILED', attempts: 3 }, after: { status: 'DONE', attempts: 4 } });
      expect(await simCalls(capped)).toMatchObject({ calls: 1, applied: 1 });
    });

    it.each([
      [{ dryRun: 'true' }, 'dryRun'],
      [{ minAge: '30' }, 'minAge'],
      [{ minAge: 30 }, 'minAge'],
      [{ force: true }, 'force'],
      ['{not json', 'body'],
      ['[]', 'body'],
      // JSON.parse would keep the last: a dry run must not quietly become a real one.
      ['{"dryRun":true,"dr\\u0079Run":false}', 'dryRun'],
    ])('body %j is E400 naming %s, and nothing changes', async (body, field) => {
      const guid = `hole-bad-${field}-${process.pid}`;
      await send({ guid });
      const before = await state(guid);
      const r = await call('POST', '/v1/transfers/{guid}/resolve', { params: { guid }, body });
      expect([r.status, r.json()['code'], r.json()['field']]).toEqual([400, 'E400', field]);
      expect(await state(guid)).toEqual(before);
    });

    it.each(['resolve', 'reprocess'] as const)("%s: a minAge below serve's --min-age is E400 naming minAge; nothing read, changed or called", async (action) => {
      // An old-enough UNKNOWN row a resolve with minAge 0ms would settle (absent → FAILED), and a FAILED one a
      // reprocess with 0ms would send again: the double send the floor is there to prevent.
      const guid = await rowFor(action, 'floor');
      const before = await state(guid);
      const calls = await simCalls(guid);
      for (const minAge of ['0ms', `${MIN_AGE_MS - 1}ms`]) {
        for (const dryRun of [false, true]) {
          const r = await call('POST', `/v1/transfers/{guid}/${action}`, { params: { guid }, body: { dryRun, minAge } });
          expect([r.status, r.json()['code'], r.json()['field'], r.json()['message']]).toEqual([400, 'E400', 'minAge', "minAge must be at least serve's --min-age (2s)"]);
        }
      }
      // Not even an unknown GUID is looked up: the body is judged first.
      expect((await call('POST', `/v1/transfers/{guid}/${action}`, { params: { guid: 'NO-SUCH-GUID' }, body: { minAge: '0ms' } })).status).toBe(400);
      expect(await state(guid)).toEqual(before);
      expect(await simCalls(guid)).toEqual(calls);
      // serve's own min-age, and more, are accepted.
      expect((await call('POST', `/v1/transfers/{guid}/${action}`, { params: { guid }, body: { dryRun: true, minAge: `${MIN_AGE_MS}ms` } })).status).toBe(200);
      expect((await call('POST', `/v1/transfers/{guid}/${action}`, { params: { guid }, body: { dryRun: true, minAge: '1h' } })).status).not.toBe(400);
    });

    it.each(['resolve', 'reprocess'] as const)('%s: a row another run has leased is E409 "held by another run"; nothing changed or called until the lease ends', async (action) => {
      const guid = await rowFor(action, 'leased');
      // Another process on the same ledger file (the settler of another relay, a CLI run) takes the row's lease.
      const other = openLedger(h.db);
      try {
        const row = (await orThrow(other.getLedger(guid)))!;
        expect(await orThrow(other.leaseRows('another-run', [row], 60_000))).toEqual(new Set([guid]));
        const before = await state(guid);
        const calls = await simCalls(guid);
        const r = await call('POST', `/v1/transfers/{guid}/${action}`, { params: { guid }, body: {} });
        expect([r.status, r.json()['code'], r.json()['message']]).toEqual([409, 'E409', 'held by another run (the background settler or another process); try again shortly']);
        expect(await state(guid)).toEqual(before);
        expect(await simCalls(guid)).toEqual(calls);
        // The lease ended (and the account system answers again): the action runs.
        await orThrow(other.releaseLeases('another-run'));
        await httpRequest(`${h.sim.url}/control/faults`, { method: 'POST', body: JSON.stringify({ byGuidPrefix: { 'late-': 'late-answer' } }) });
        const ran = await call('POST', `/v1/transfers/{guid}/${action}`, { params: { guid }, body: {} });
        expect(ran.status).toBe(200);
        expect(ran.json()['outcome']).toBe(action === 'resolve' ? 'absent' : 'done');
      } finally {
        await other.close();
      }
    });

    it('an unknown GUID is E404, a malformed one E400 naming guid, a body not JSON 415', async () => {
      expect((await call('POST', '/v1/transfers/{guid}/reprocess', { params: { guid: 'NO-SUCH-GUID' }, body: {} })).status).toBe(404);
      const bad = await call('POST', '/v1/transfers/{guid}/resolve', { params: { guid: 'bad guid' }, body: {} });
      expect([bad.status, bad.json()['field']]).toEqual([400, 'guid']);
      const form = await httpRequest(`${h.relay.url}/v1/transfers/NO-SUCH-GUID/resolve`, { method: 'POST', body: 'dryRun=false', headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Bearer ${tokens['ops']!}` } });
      conforms('POST', '/v1/transfers/{guid}/resolve', form);
      expect([form.status, form.json()['code'], form.json()['field']]).toEqual([415, 'E400', 'Content-Type']);
    });
  });
  describe('GET /v1/reconciliations and /v1/reconciliations/{id}', () => {
    const BIG = 2n ** 53n + 1n;
    it('the recorded runs newest first, a page at a time; one run with its summary and breaks, first-seen runs, accounts masked, amounts exact; scope read', async () => {
      const window = { from: 1000, to: 2000, pendingMs: 0 };
      const store = openLedger(h.db);
      const records = [sentRecord('REC-A', 1100, 'DONE', '0000', { from: '6222021001777', amount: Number(BIG) }), sentRecord('REC-B', 1200, 'FAILED', null)];
      const journal = [{ guid: 'REC-A', appliedAt: 1110, from: '6222021001777', amount: BIG }, { guid: 'REC-A', appliedAt: 1120, from: '6222021001777', amount: BIG }, { guid: 'REC-B', appliedAt: 1210 }];
      const runs: string[] = [];
      try {
        for (let i = 0; i < 3; i++) runs.push((await orThrow(store.recordReconciliation(await runOver(tmp(), records, journal, window)))).id);
      } finally {
        await store.close();
      }
      const first = await call('GET', '/v1/reconciliations', { token: tokens['reader']!, query: 'limit=2' });
      expect(first.status).toBe(200);
      const page = first.json() as { runs: Array<Record<string, unknown>>; nextCursor: string | null };
      expect(page.runs.map((r) => r['id'])).toEqual([runs[2], runs[1]]);
      expect(page.runs[0]).toMatchObject({ window, severities: { P1: 2, P2: 0 }, breakCount: 2, counts: { duplicate_in_journal: 1, unsettled_in_ledger: 1, matched: 0 } });
      expect(page.nextCursor).toBe(runs[1]);
      const rest = (await call('GET', '/v1/reconciliations', { token: tokens['reader']!, query: `limit=2&cursor=${page.nextCursor}` })).json() as typeof page;
      expect([rest.runs.map((r) => r['id']), rest.nextCursor]).toEqual([[runs[0]], null]);

      const one = await call('GET', '/v1/reconciliations/{id}', { token: tokens['reader']!, params: { id: runs[2]! } });
      expect(one.status).toBe(200);
      expect(one.body).not.toContain('6222021001777');
      expect(one.body).toContain(`"amount":${BIG}`);
      expect(one.body).toContain(`"amount":${BIG * 2n}`);
      const run = one.json() as { breaks: Array<Record<string, unknown>>; sha256: string };
      expect(run.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(run.breaks.map((b) => [b['guid'], b['category'], b['severity'], b['firstSeen']])).toEqual([
        ['REC-A', 'duplicate_in_journal', 'P1', runs[0]],
        ['REC-B', 'unsettled_in_ledger', 'P1', runs[0]],
      ]);
      expect(run.breaks[0]!['ledger']).toMatchObject({ status: 'DONE', code: '0000', from: '*********1777' });

      // /metrics: the last run's breaks per category and severity, and when it was recorded.
      const metrics = (await call('GET', '/metrics', { token: tokens['reader']! })).body;
      expect(metrics).toMatch(/^guidgate_reconciliation_breaks\{category="duplicate_in_journal"\} 1$/m);
      expect(metrics).toMatch(/^guidgate_reconciliation_breaks\{category="unsettled_in_ledger"\} 1$/m);
      expect(metrics).toMatch(/^guidgate_reconciliation_breaks\{category="missing_in_journal"\} 0$/m);
      expect(metrics).toMatch(/^guidgate_reconciliation_breaks_by_severity\{severity="P1"\} 2$/m);
      const at = Number(/^guidgate_reconciliation_last_run_timestamp_seconds (\S+)$/m.exec(metrics)?.[1]);
      expect(at * 1000).toBe((page.runs[0]!['recordedAt'] as number));
      expect(metrics).toMatch(/^guidgate_reconciliation_last_window_end_timestamp_seconds 2$/m);

      // Scope read: a key without it is refused, with or without an id.
      for (const [token, status] of [[null, 401], [tokens['ops']!, 403], [tokens['pay']!, 403], [tokens['reader']!, 200]] as const) {
        expect((await call('GET', '/v1/reconciliations/{id}', { token, params: { id: runs[0]! } })).status).toBe(status);
      }
    });

    it('a run with many breaks is served a page at a time (after, limit; nextAfter), never whole; every break once, in GUID order', async () => {
      const window = { from: 1000, to: 2000, pendingMs: 0 };
      // Postings of GUIDs the ledger does not know: one missing_in_ledger break each.
      const guids = Array.from({ length: 2345 }, (_, i) => `PAGE-${String(i).padStart(5, '0')}`);
      const store = openLedger(h.db);
      let id: string;
      try {
        id = (await orThrow(store.recordReconciliation(await runOver(tmp(), [], guids.map((guid, i) => ({ guid, appliedAt: 1000 + (i % 900) })), window)))).id;
      } finally {
        await store.close();
      }
      type Page = { breakCount: number; breaks: Array<{ guid: string; category: string }>; nextAfter: string | null };
      const page = async (query?: string): Promise<Page> => {
        const r = await call('GET', '/v1/reconciliations/{id}', { token: tokens['reader']!, params: { id }, ...(query === undefined ? {} : { query }) });
        expect(r.status, r.body.slice(0, 200)).toBe(200);
        conforms('GET', '/v1/reconciliations/{id}', r);
        return r.json() as Page;
      };
      const byDefault = await page();
      expect([byDefault.breakCount, byDefault.breaks.length, byDefault.nextAfter]).toEqual([2345, 1000, 'PAGE-00999']);
      const seen: string[] = [];
      const sizes: number[] = [];
      let after: string | null = null;
      do {
        const p: Page = await page(`limit=1000${after === null ? '' : `&after=${after}`}`);
        sizes.push(p.breaks.length);
        seen.push(...p.breaks.map((b) => b.guid));
        expect(new Set(p.breaks.map((b) => b.category))).toEqual(new Set(['missing_in_ledger']));
        after = p.nextAfter;
      } while (after !== null);
      expect(sizes).toEqual([1000, 1000, 345]);
      expect(seen).toEqual(guids);
      expect(await page('limit=5000')).toMatchObject({ nextAfter: null });
      expect((await page('after=PAGE-99999')).breaks).toEqual([]);
      for (const query of ['limit=0', 'limit=5001', 'limit=x', 'after=']) {
        const r = await call('GET', '/v1/reconciliations/{id}', { token: tokens['reader']!, params: { id }, query });
        expect([r.status, r.json()['code'], r.json()['field']], query).toEqual([400, 'E400', query.split('=')[0]]);
      }
    });

    it('bad input is E400 naming the parameter; an unknown run is E404', async () => {
      const at = (params: Record<string, string>, query?: string) => call('GET', params['id'] === undefined ? '/v1/reconciliations' : '/v1/reconciliations/{id}', { token: tokens['reader']!, params, ...(query === undefined ? {} : { query }) });
      for (const id of ['abc', '0', '-1', '1.5', '12345678901234567']) {
        const r = await at({ id });
        expect([r.status, r.json()['code'], r.json()['field']], id).toEqual([400, 'E400', 'id']);
      }
      const missing = await at({ id: '999999' });
      expect([missing.status, missing.json()['code'], missing.json()['message']]).toEqual([404, 'E404', 'no such reconciliation run']);
      for (const [query, field] of [['limit=0', 'limit'], ['limit=501', 'limit'], ['limit=x', 'limit'], ['cursor=abc', 'cursor'], ['since=1', 'since']] as const) {
        const r = await at({}, query);
        expect([r.status, r.json()['code'], r.json()['field']], query).toEqual([400, 'E400', field]);
      }
    });
  });
});
