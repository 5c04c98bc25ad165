import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MockAgent, errors as undiciErrors, request } from 'undici';
import { FAILURE_RULES, classifyFailure } from '../../src/relay/classifyFailure.js';
import type { FailureRule } from '../../src/relay/classifyFailure.js';

/** An error carrying `rule`'s key the way Node/undici would set it. */
function errorFor(rule: FailureRule, extra: Record<string, unknown> = {}): Error {
  const err = new Error(`synthetic ${rule.key}`);
  if (rule.match === 'name') {
    err.name = rule.key;
  } else {
    const code = rule.match === 'code-prefix' ? `${rule.key}SOMETHING_SPECIFIC` : rule.key;
    Object.assign(err, { code });
  }
  return Object.assign(err, extra);
}

/** The ways undici and its callers wrap an error: fetch's TypeError, a plain wrapper, two levels deep. */
const wrappings: ReadonlyArray<[string, (e: Error) => unknown]> = [
  ['bare', (e) => e],
  ['fetch-style TypeError cause', (e) => new TypeError('fetch failed', { cause: e })],
  ['two levels of cause', (e) => new Error('outer', { cause: new Error('middle', { cause: e }) })],
];

const keyOf = (r: FailureRule): string => `${r.match}:${r.key}`;

describe('FAILURE_RULES table', () => {
  it('has no duplicate keys', () => {
    const keys = FAILURE_RULES.map(keyOf);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('covers the codes the contract names', () => {
    const keys = new Set(FAILURE_RULES.map((r) => r.key));
    for (const k of [
      'ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH',
      'EADDRNOTAVAIL', 'ERR_TLS_CERT_', 'ERR_SSL_', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ECONNRESET',
      'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'UND_ERR_ABORTED', 'AbortError',
    ]) {
      expect(keys.has(k), k).toBe(true);
    }
  });

  it('never makes a stale keep-alive symptom FAILED', () => {
    for (const code of ['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']) {
      const rule = FAILURE_RULES.find((r) => r.key === code);
      expect(rule?.outcome).toBe('UNKNOWN');
      expect(classifyFailure(Object.assign(new Error('x'), { code, syscall: 'write' })).outcome).toBe('UNKNOWN');
      expect(classifyFailure(Object.assign(new Error('x'), { code }), { requestWritten: false }).outcome).toBe('UNKNOWN');
    }
  });
});

describe.each(FAILURE_RULES.map((r) => [keyOf(r), r] as const))('rule %s', (_name, rule) => {
  it.each(wrappings)('%s', (_w, wrap) => {
    if (rule.outcome === 'UNKNOWN') {
      expect(classifyFailure(wrap(errorFor(rule)))).toMatchObject({ outcome: 'UNKNOWN', reason: rule.reason });
      // Even when the caller knows it was never written, an UNKNOWN code stays UNKNOWN (the table is conservative).
      expect(classifyFailure(wrap(errorFor(rule)), { requestWritten: false })).toMatchObject({ outcome: 'UNKNOWN', reason: rule.reason });
      return;
    }
    // FAILED with evidence of the connect phase.
    expect(classifyFailure(wrap(errorFor(rule, { syscall: 'connect' })))).toMatchObject({ outcome: 'FAILED', reason: rule.reason });
    expect(classifyFailure(wrap(errorFor(rule)), { requestWritten: false })).toMatchObject({ outcome: 'FAILED', reason: rule.reason });
    // Never FAILED once the client says the request reached the socket.
    expect(classifyFailure(wrap(errorFor(rule, { syscall: 'connect' })), { requestWritten: true }).outcome).toBe('UNKNOWN');
    if (rule.phase === 'any') {
      expect(classifyFailure(wrap(errorFor(rule)))).toMatchObject({ outcome: 'FAILED', reason: rule.reason });
    } else {
      // Without evidence, or with evidence of an established socket, the code is ambiguous: UNKNOWN.
      expect(classifyFailure(wrap(errorFor(rule)))).toMatchObject({ outcome: 'UNKNOWN', reason: rule.otherwise });
      expect(classifyFailure(wrap(errorFor(rule, { syscall: 'read' })))).toMatchObject({ outcome: 'UNKNOWN', reason: rule.otherwise });
    }
  });

  it('puts the code (or name) in the detail', () => {
    const c = classifyFailure(errorFor(rule, { syscall: 'connect' }));
    expect(c.detail).toContain(rule.key);
  });
});

describe('classifyFailure: the rest', () => {
  it.each<[string, unknown]>([
    ['undefined', undefined],
    ['null', null],
    ['string', 'socket hang up'],
    ['number', 42],
    ['symbol', Symbol('x')],
    ['plain object', { message: 'nope' }],
    ['Error without code', new Error('mystery')],
    ['Error with unknown code', Object.assign(new Error('x'), { code: 'EWHATEVER' })],
    ['numeric code', Object.assign(new Error('x'), { code: 7 })],
    ['TypeError wrapping nothing known', new TypeError('fetch failed', { cause: new Error('?') })],
  ])('%s → UNKNOWN/non-definite', (_n, value) => {
    const c = classifyFailure(value);
    expect(c).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
    expect(typeof c.detail).toBe('string');
  });

  it('survives cause cycles and throwing getters', () => {
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    Object.assign(a, { cause: b });
    expect(classifyFailure(a).outcome).toBe('UNKNOWN');
    const hostile = Object.defineProperty(new Error('h'), 'code', {
      get() {
        throw new Error('boom');
      },
    });
    expect(classifyFailure(hostile).outcome).toBe('UNKNOWN');
  });

  it('lets any UNKNOWN evidence in the chain win over FAILED evidence', () => {
    const refused = Object.assign(new Error('refused'), { code: 'ECONNREFUSED', syscall: 'connect' });
    const reset = Object.assign(new Error('reset', { cause: refused }), { code: 'ECONNRESET' });
    expect(classifyFailure(reset)).toMatchObject({ outcome: 'UNKNOWN', reason: 'reset' });
    const outerRefused = Object.assign(new Error('refused', { cause: new undiciErrors.SocketError('other side closed') }), {
      code: 'ECONNREFUSED',
    });
    expect(classifyFailure(outerRefused)).toMatchObject({ outcome: 'UNKNOWN', reason: 'reset' });
  });

  it('reads happy-eyeballs AggregateErrors (code copied from the first member, no syscall)', () => {
    const member = (code: string, syscall?: string): Error =>
      Object.assign(new Error(code), syscall === undefined ? { code } : { code, syscall });
    const agg = (members: Error[]): Error => Object.assign(new AggregateError(members, 'all failed'), { code: (members[0] as Error & { code: string }).code });
    expect(classifyFailure(agg([member('ETIMEDOUT', 'connect'), member('ECONNREFUSED', 'connect')]))).toMatchObject({
      outcome: 'FAILED',
      reason: 'connect-timeout',
    });
    expect(classifyFailure(agg([member('ETIMEDOUT', 'connect'), member('ETIMEDOUT')])).outcome).toBe('UNKNOWN');
    expect(classifyFailure(agg([member('ECONNREFUSED', 'connect'), member('ECONNRESET', 'read')])).outcome).toBe('UNKNOWN');
  });

  it('classifies the real undici error classes', () => {
    const E = undiciErrors;
    expect(classifyFailure(new E.ConnectTimeoutError())).toMatchObject({ outcome: 'FAILED', reason: 'connect-timeout' });
    expect(classifyFailure(new E.HeadersTimeoutError())).toMatchObject({ outcome: 'UNKNOWN', reason: 'timeout' });
    expect(classifyFailure(new E.BodyTimeoutError())).toMatchObject({ outcome: 'UNKNOWN', reason: 'timeout' });
    expect(classifyFailure(new E.SocketError('other side closed'))).toMatchObject({ outcome: 'UNKNOWN', reason: 'reset' });
    expect(classifyFailure(new E.ClientClosedError())).toMatchObject({ outcome: 'UNKNOWN' });
    expect(classifyFailure(new E.ClientDestroyedError())).toMatchObject({ outcome: 'UNKNOWN' });
    expect(classifyFailure(new E.RequestAbortedError())).toMatchObject({ outcome: 'UNKNOWN', reason: 'timeout' });
    expect(classifyFailure(new E.InformationalError('aborted'))).toMatchObject({ outcome: 'UNKNOWN' });
    expect(classifyFailure(new E.ResponseContentLengthMismatchError())).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
    expect(classifyFailure(new E.HeadersOverflowError())).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
    expect(classifyFailure(new E.ResponseExceededMaxSizeError())).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
    expect(classifyFailure(new E.RequestContentLengthMismatchError())).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
  });

  it('classifies AbortSignal reasons as UNKNOWN/timeout', () => {
    const ac = new AbortController();
    ac.abort();
    expect(classifyFailure(ac.signal.reason)).toMatchObject({ outcome: 'UNKNOWN', reason: 'timeout' });
    const timeoutSignal = AbortSignal.timeout(0);
    return new Promise<void>((resolve) => {
      timeoutSignal.addEventListener('abort', () => {
        expect(classifyFailure(timeoutSignal.reason)).toMatchObject({ outcome: 'UNKNOWN', reason: 'timeout' });
        resolve();
      });
    });
  });
});

describe('classifyFailure on errors produced by undici itself', () => {
  let agent: MockAgent | undefined;
  afterEach(async () => {
    await agent?.close();
    agent = undefined;
  });

  it.each<[string, Error, string, string]>([
    ['ECONNREFUSED', Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', syscall: 'connect' }), 'FAILED', 'refused'],
    ['ECONNRESET', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' }), 'UNKNOWN', 'reset'],
    ['SocketError', new undiciErrors.SocketError('other side closed'), 'UNKNOWN', 'reset'],
    ['HeadersTimeoutError', new undiciErrors.HeadersTimeoutError(), 'UNKNOWN', 'timeout'],
  ])('MockAgent replyWithError(%s)', async (_n, error, outcome, reason) => {
    agent = new MockAgent();
    agent.disableNetConnect();
    agent.get('http://account.test').intercept({ path: '/transfer', method: 'POST' }).replyWithError(error);
    const thrown = await request('http://account.test/transfer', { method: 'POST', body: '{}', dispatcher: agent }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(thrown).toBeDefined();
    expect(classifyFailure(thrown)).toMatchObject({ outcome, reason });
  });

  it('MockAgent with net connect disabled → not FAILED (cannot prove anything)', async () => {
    agent = new MockAgent();
    agent.disableNetConnect();
    const thrown = await request('http://unmocked.test/transfer', { method: 'POST', body: '{}', dispatcher: agent }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(classifyFailure(thrown).outcome).toBe('UNKNOWN');
  });

  it('a real refused connection through undici → FAILED/refused', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer();
      s.listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const thrown = await request(`http://127.0.0.1:${port}/transfer`, { method: 'POST', body: '{}' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(classifyFailure(thrown)).toMatchObject({ outcome: 'FAILED', reason: 'refused' });
  });

  it('a real DNS failure through undici → FAILED/refused', async () => {
    const thrown = await request('http://guidgate-no-such-host.invalid/transfer', { method: 'POST', body: '{}' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const c = classifyFailure(thrown);
    // ENOTFOUND normally; a sandbox without a resolver may say EAI_AGAIN. Both are DNS, both FAILED.
    expect(c.outcome).toBe('FAILED');
  });
});
