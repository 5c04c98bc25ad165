import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { MockAgent, errors as undiciErrors, request } from 'undici';
import { FAILURE_RULES, classifyFailure } from '../../src/account/classifyFailure.js';
import type { FailureRule } from '../../src/account/classifyFailure.js';
import { useCleanup } from '../support/cleanup.js';

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
  const cleanup = useCleanup();

  it.each<[string, Error, string, string]>([
    ['ECONNREFUSED', Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED', syscall: 'connect' }), 'FAILED', 'refused'],
    ['ECONNRESET', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', syscall: 'read' }), 'UNKNOWN', 'reset'],
    ['SocketError', new undiciErrors.SocketError('other side closed'), 'UNKNOWN', 'reset'],
    ['HeadersTimeoutError', new undiciErrors.HeadersTimeoutError(), 'UNKNOWN', 'timeout'],
  ])('MockAgent replyWithError(%s)', async (_n, error, outcome, reason) => {
    const agent = cleanup.use(new MockAgent());
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
    const agent = cleanup.use(new MockAgent());
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

/** An error with these own properties, the way Node and undici attach them. */
const err = (props: Record<string, unknown>, message = 'x', options?: ErrorOptions): Error => Object.assign(new Error(message, options), props);
const refusedAtConnect = (): Error => err({ code: 'ECONNREFUSED', syscall: 'connect' }, 'connect ECONNREFUSED');
/** A chain of `depth` code-less wrappers around `inner`. */
const wrapIn = (depth: number, inner: Error): Error => {
  let e = inner;
  for (let i = 0; i < depth; i++) e = new Error(`wrapper ${i}`, { cause: e });
  return e;
};

describe('classifyFailure: evidence of the connect phase', () => {
  const agg = (members: unknown[], code = 'ETIMEDOUT'): Error => Object.assign(new AggregateError(members, 'all failed'), { code });

  it('an AggregateError is FAILED only when EVERY member with a code failed in connect', () => {
    // One address timed out connecting, the other failed mid-request with a code nothing in the table knows:
    // that request may have left, so the whole is UNKNOWN.
    expect(classifyFailure(agg([err({ code: 'ETIMEDOUT', syscall: 'connect' }), err({ code: 'EIO', syscall: 'write' })]))).toMatchObject({
      outcome: 'UNKNOWN',
      reason: 'timeout',
    });
    expect(classifyFailure(agg([err({ code: 'EIO', syscall: 'write' }), err({ code: 'ETIMEDOUT', syscall: 'connect' })])).outcome).toBe('UNKNOWN');
    expect(classifyFailure(agg([err({ code: 'ETIMEDOUT', syscall: 'connect' }), err({ code: 'EHOSTUNREACH', syscall: 'getaddrinfo' })]))).toMatchObject({
      outcome: 'FAILED',
      reason: 'connect-timeout',
    });
  });

  it('members without a code neither prove nor disprove anything', () => {
    expect(classifyFailure(agg([err({ code: 'ETIMEDOUT', syscall: 'connect' }), new Error('no code')]))).toMatchObject({ outcome: 'FAILED' });
    expect(classifyFailure(agg([err({ code: 'ETIMEDOUT', syscall: 'connect' }), err({ code: '' })]))).toMatchObject({ outcome: 'FAILED' });
  });

  it('an AggregateError with no member that has a code is no evidence', () => {
    expect(classifyFailure(agg([]))).toMatchObject({ outcome: 'UNKNOWN', reason: 'timeout' });
    expect(classifyFailure(agg([new Error('a'), new Error('b')]))).toMatchObject({ outcome: 'UNKNOWN', reason: 'timeout' });
  });

  it("a cause's connect syscall is not evidence for the error wrapping it", () => {
    // `errors` is what makes the members evidence; a `cause` is another error, classified on its own.
    expect(classifyFailure(err({ code: 'ETIMEDOUT' }, 'x', { cause: refusedAtConnect() }))).toMatchObject({ outcome: 'UNKNOWN', reason: 'timeout' });
  });

  it("the error's own syscall decides, even on an AggregateError", () => {
    const members = [err({ code: 'ETIMEDOUT', syscall: 'connect' })];
    expect(classifyFailure(Object.assign(agg(members), { syscall: 'read' })).outcome).toBe('UNKNOWN');
    expect(classifyFailure(Object.assign(agg(members), { syscall: 'connect' })).outcome).toBe('FAILED');
    // An empty syscall is no syscall: the members decide.
    expect(classifyFailure(Object.assign(agg(members), { syscall: '' })).outcome).toBe('FAILED');
  });
});

describe('classifyFailure: how a rule matches', () => {
  it('a code rule matches the whole code, not a prefix of it', () => {
    expect(classifyFailure(err({ code: 'ENOTFOUND_SOMETHING' }))).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
    expect(classifyFailure(err({ code: 'XECONNREFUSED', syscall: 'connect' }))).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
  });

  it('a code is never read as a name, nor a name as a code', () => {
    expect(classifyFailure(Object.assign(new Error('x'), { name: 'ECONNREFUSED' }))).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
    expect(classifyFailure(Object.assign(new Error('x'), { name: 'ERR_TLS_CERT_ALTNAME_INVALID' }))).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
    expect(classifyFailure(err({ code: 'TimeoutError' }))).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
    // A prefix rule's key is not a code of its own.
    expect(classifyFailure(err({ code: 'ERR_TLS_CERT_' }))).toMatchObject({ outcome: 'FAILED', reason: 'refused' });
  });

  it('reads a function carrying a code, like any object', () => {
    expect(classifyFailure(Object.assign(() => undefined, { code: 'ECONNREFUSED' }))).toMatchObject({ outcome: 'FAILED', reason: 'refused' });
  });

  it('an error whose name is not a string is judged by its code', () => {
    const e = Object.assign(Object.create(null) as object, { code: 'ECONNREFUSED', name: 7 });
    expect(classifyFailure(e)).toMatchObject({ outcome: 'FAILED', reason: 'refused' });
  });
});

describe('classifyFailure: the walk over cause and errors', () => {
  it('looks 31 wrappers deep: an UNKNOWN sign there still wins', () => {
    const deep = err({ code: 'ECONNRESET' });
    expect(classifyFailure(Object.assign(wrapIn(31, deep), { code: 'ECONNREFUSED', syscall: 'connect' })).outcome).toBe('UNKNOWN');
  });

  it('stops after 32 error objects: a FAILED sign deeper than that is not believed', () => {
    expect(classifyFailure(wrapIn(31, refusedAtConnect()))).toMatchObject({ outcome: 'FAILED', reason: 'refused' });
    expect(classifyFailure(wrapIn(32, refusedAtConnect()))).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
    expect(classifyFailure(wrapIn(500, refusedAtConnect()))).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
  });

  it('counts an error object once however often it is referenced, so the bound does not hide what follows', () => {
    const shared = new Error('shared, no code', { cause: err({ code: 'ECONNRESET' }) });
    const outer = Object.assign(new AggregateError(Array.from({ length: 40 }, () => shared), 'x'), { code: 'ECONNREFUSED', syscall: 'connect' });
    expect(classifyFailure(outer)).toMatchObject({ outcome: 'UNKNOWN', reason: 'reset' });
  });

  it('terminates on a cycle, and still sees every object in it', () => {
    const a = err({}, 'a');
    const b = err({ code: 'ECONNRESET' }, 'b', { cause: a });
    Object.assign(a, { cause: b, code: 'ECONNREFUSED', syscall: 'connect' });
    expect(classifyFailure(a)).toMatchObject({ outcome: 'UNKNOWN', reason: 'reset' });
    const self = refusedAtConnect();
    Object.assign(self, { cause: self });
    expect(classifyFailure(self)).toMatchObject({ outcome: 'FAILED', reason: 'refused' });
  });

  it('skips null and undefined members of errors: they do not count against the bound', () => {
    expect(classifyFailure(new AggregateError([null, undefined, refusedAtConnect()], 'x'))).toMatchObject({ outcome: 'FAILED', reason: 'refused' });
    // The aggregate, 30 wrappers and the refusal are 32 objects: exactly the bound.
    expect(classifyFailure(new AggregateError([null, undefined, wrapIn(30, refusedAtConnect())], 'x'))).toMatchObject({ outcome: 'FAILED', reason: 'refused' });
    expect(classifyFailure(new AggregateError([wrapIn(31, refusedAtConnect())], 'x'))).toMatchObject({ outcome: 'UNKNOWN', reason: 'non-definite' });
  });

  it('walks breadth-first: the outermost sign gives the reason', () => {
    // Both UNKNOWN; the reason recorded is the one nearest the top.
    const members = [err({ code: 'ECONNRESET' }), err({ code: 'UND_ERR_HEADERS_TIMEOUT' })];
    expect(classifyFailure(new AggregateError(members, 'x'))).toMatchObject({ outcome: 'UNKNOWN', reason: 'reset' });
    expect(classifyFailure(err({ code: 'ECONNRESET' }, 'x', { cause: err({ code: 'UND_ERR_HEADERS_TIMEOUT' }) }))).toMatchObject({ reason: 'reset' });
    expect(classifyFailure(err({ code: 'UND_ERR_HEADERS_TIMEOUT' }, 'x', { cause: err({ code: 'ECONNRESET' }) }))).toMatchObject({ reason: 'timeout' });
    const nested = new AggregateError([new Error('w', { cause: err({ code: 'ECONNRESET' }) }), err({ code: 'UND_ERR_BODY_TIMEOUT' })], 'x');
    expect(classifyFailure(nested)).toMatchObject({ reason: 'timeout' });
    // Both FAILED: the outermost reason too.
    const failed = err({ code: 'UND_ERR_CONNECT_TIMEOUT' }, 'x', { cause: refusedAtConnect() });
    expect(classifyFailure(failed)).toMatchObject({ outcome: 'FAILED', reason: 'connect-timeout' });
    expect(classifyFailure(err({ code: 'ECONNREFUSED' }, 'x', { cause: err({ code: 'UND_ERR_CONNECT_TIMEOUT' }) }))).toMatchObject({ reason: 'refused' });
  });
});

describe('classifyFailure: the request was handed to the socket', () => {
  it('turns a connect-phase code into UNKNOWN with the matching reason', () => {
    expect(classifyFailure(err({ code: 'UND_ERR_CONNECT_TIMEOUT' }), { requestWritten: true })).toEqual({
      outcome: 'UNKNOWN',
      reason: 'timeout',
      detail: 'UND_ERR_CONNECT_TIMEOUT x (after the request was handed to the socket)',
    });
    expect(classifyFailure(refusedAtConnect(), { requestWritten: true })).toEqual({
      outcome: 'UNKNOWN',
      reason: 'reset',
      detail: 'ECONNREFUSED (connect) connect ECONNREFUSED (after the request was handed to the socket)',
    });
  });
});

describe('classifyFailure: the detail text', () => {
  it('code, syscall and message; the name when there is no code', () => {
    expect(classifyFailure(refusedAtConnect()).detail).toBe('ECONNREFUSED (connect) connect ECONNREFUSED');
    expect(classifyFailure(Object.assign(new Error('stop'), { name: 'AbortError' })).detail).toBe('AbortError stop');
    expect(classifyFailure(err({ code: 'ETIMEDOUT', syscall: 'read' }, 'read ETIMEDOUT')).detail).toBe('ETIMEDOUT (read) read ETIMEDOUT (not provably during connect)');
    expect(classifyFailure(err({ code: 'EWHAT' }, 'odd')).detail).toBe('unrecognised: EWHAT odd');
    expect(classifyFailure(Object.assign(new Error(''), { name: '' })).detail).toBe('unrecognised: non-error value: ');
  });

  it('values that are not errors', () => {
    expect(classifyFailure(undefined).detail).toBe('unrecognised: undefined');
    expect(classifyFailure('socket hang up').detail).toBe('unrecognised: non-error value: socket hang up');
    expect(classifyFailure({}).detail).toBe('unrecognised: non-error value: [object Object]');
    // String() throws on an object without a prototype: the detail must not.
    expect(classifyFailure(Object.create(null)).detail).toBe('unrecognised: non-error value');
  });

  it('is bounded, whatever the error carries', () => {
    const long = 'm'.repeat(1000);
    expect(classifyFailure(err({ code: 'EWHAT' }, long)).detail).toBe(`unrecognised: EWHAT ${'m'.repeat(294)}`);
    expect(classifyFailure(long).detail).toBe(`unrecognised: non-error value: ${'m'.repeat(200 - 'non-error value: '.length)}`);
  });
});
