import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createClient, NotSentError, TransferAbortedError, type AttemptReport } from '../../src/client/index.js';

/** One scripted reply of the stub relay: a contract code with its HTTP status, and a Retry-After header or none. */
interface Step {
  readonly code: string;
  readonly http: number;
  /** Made when the reply is sent (an HTTP-date is relative to then). */
  readonly retryAfter?: () => string;
}

/** What the stub saw of one request, by its own clocks: when it arrived and when its reply was written. */
interface Seen {
  readonly arrived: number;
  readonly arrivedWall: number;
  replied: number;
  retryAfter: string | undefined;
}

const notSent = (retryAfter?: () => string): Step => ({ code: 'E902', http: 503, ...(retryAfter === undefined ? {} : { retryAfter }) });
const ledgerDown = (retryAfter?: () => string): Step => ({ code: 'E503', http: 503, ...(retryAfter === undefined ? {} : { retryAfter }) });
const done: Step = { code: '0000', http: 200 };

/** An HTTP-date (IMF-fixdate, whole seconds) at least `ms` from now. */
const dateIn = (ms: number): string => new Date(Math.ceil((Date.now() + ms) / 1000) * 1000).toUTCString();

/**
 * guidgate/client against a stub relay on loopback that answers "not sent" (E902, E503) with a Retry-After: the
 * next attempt never arrives sooner than the header asked. Times are the stub's own (one monotonic clock for the
 * gaps; the wall clock for an HTTP-date, which names a wall-clock time), never a budget of the test.
 */
describe('guidgate/client honours Retry-After on a not-sent reply', () => {
  let server: Server;
  let url = '';
  let script: Step[] = [];
  let seen: Seen[] = [];
  const sockets = new Set<Socket>();

  beforeAll(async () => {
    server = createServer((req, res) => {
      const entry: Seen = { arrived: performance.now(), arrivedWall: Date.now(), replied: 0, retryAfter: undefined };
      seen.push(entry);
      const step = script[seen.length - 1] ?? done;
      req.resume();
      req.on('end', () => {
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        entry.retryAfter = step.retryAfter?.();
        if (entry.retryAfter !== undefined) headers['retry-after'] = entry.retryAfter;
        entry.replied = performance.now();
        res.writeHead(step.http, headers).end(JSON.stringify({ guid: 'RA-1', code: step.code, message: `scripted ${step.code}` }));
      });
    });
    server.on('connection', (s: Socket) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const a = server.address();
    url = `http://127.0.0.1:${typeof a === 'object' && a !== null ? a.port : 0}`;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  });
  beforeEach(() => {
    script = [];
    seen = [];
  });

  // The client's own backoff is a few ms: any longer gap between two attempts is the header's doing.
  const transfer = async (maxWait: number, onAttempt?: (a: AttemptReport) => void, signal?: AbortSignal, backoff = { initialMs: 5, maxMs: 20 }) => {
    const client = createClient({ baseUrl: url, timeout: 2_000, maxWait, backoff, ...(onAttempt === undefined ? {} : { onAttempt }) });
    try {
      return await client.transfer({ guid: 'RA-1', from: 'A-1', to: 'B-2', amount: 100 }, signal === undefined ? {} : { signal });
    } finally {
      await client.close();
    }
  };

  it('delay-seconds: each resend after E902 and E503 arrives at least that long after the reply', async () => {
    script = [notSent(() => '1'), ledgerDown(() => '2'), notSent(() => '0'), done];
    const reports: AttemptReport[] = [];
    expect(await transfer(20_000, (a) => void reports.push(a))).toMatchObject({ status: 'definite', code: '0000', attempts: 4 });
    expect(seen).toHaveLength(4);
    const gaps = seen.slice(1).map((s, i) => s.arrived - seen[i]!.replied);
    expect(gaps[0]).toBeGreaterThanOrEqual(1_000);
    expect(gaps[1]).toBeGreaterThanOrEqual(2_000);
    expect(gaps[2]).toBeGreaterThanOrEqual(0);
    expect(reports.map((r) => r.retryAfterMs)).toEqual([1_000, 2_000, 0, undefined]);
  });

  it('an HTTP-date: the resend arrives no sooner than that time', async () => {
    const asked: string[] = [];
    script = [notSent(() => { const d = dateIn(1_200); asked.push(d); return d; }), done];
    expect(await transfer(20_000)).toMatchObject({ status: 'definite', attempts: 2 });
    expect(seen[1]!.arrivedWall).toBeGreaterThanOrEqual(Date.parse(asked[0]!));
  });

  it('a malformed header: the client\'s own backoff, so the resends go on', async () => {
    script = [notSent(() => 'soon'), notSent(() => '-1'), ledgerDown(() => '1.5'), notSent(() => 'Fri, 31 Feb 2031 10:00:00 GMT'), done];
    expect(await transfer(20_000)).toMatchObject({ status: 'definite', attempts: 5 });
  });

  it('a wait past maxWait ends the call at once: NotSentError with the time the relay named, one attempt spent', async () => {
    script = [notSent(() => '86400'), done];
    const before = Date.now();
    const err: unknown = await transfer(5_000).catch((e: unknown) => e);
    expect(seen).toHaveLength(1);
    expect(err).toBeInstanceOf(NotSentError);
    const e = err as NotSentError;
    expect(e.retryAt!.getTime()).toBeGreaterThanOrEqual(before + 86_400_000);
    expect(e.message).toContain(`not before ${e.retryAt!.toISOString()}`);

    // An absurd value (past what a Date can hold) is no exception to it: one attempt, no time named.
    script = [notSent(() => '9'.repeat(30)), done];
    seen = [];
    const absurd: unknown = await transfer(5_000).catch((x: unknown) => x);
    expect(seen).toHaveLength(1);
    expect(absurd).toBeInstanceOf(NotSentError);
    expect((absurd as NotSentError).retryAt).toBeNull();
  });

  it('says what is true when it gives up: nothing applied so far, the GUID stays open, resend it, never a new one', async () => {
    // The own backoff (at least 1 s) outlasts maxWait: one attempt, then the call ends on its reply, not on a timeout.
    script = [notSent(), notSent()];
    const err: unknown = await transfer(300, undefined, undefined, { initialMs: 2_000, maxMs: 2_000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotSentError);
    const e = err as NotSentError;
    expect(e).toMatchObject({ code: 'E902', lastCode: 'E902', guid: 'RA-1', attempts: 1, retryAt: null });
    expect(e.message).toMatch(/^not sent so far \(1 attempt\(s\), last reply E902\): nothing has been applied yet/);
    expect(e.message).toContain('the transfer stays open under GUID RA-1');
    expect(e.message).toContain("may still be sent by an operator's reprocess");
    expect(e.message).toContain('resend the same GUID later, never a new one');
    expect(e.message).not.toMatch(/was not applied/);
  });

  it('cancelling during a Retry-After wait ends at once, as not applied', async () => {
    script = [notSent(() => '30'), done];
    const controller = new AbortController();
    const call = transfer(60_000, (a) => { if (a.attempt === 1) setImmediate(() => controller.abort()); }, controller.signal);
    await expect(call).rejects.toBeInstanceOf(TransferAbortedError);
    expect(seen).toHaveLength(1);
  });
});
