import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuthError,
  createClient,
  GuidExpiredError,
  GuidReusedError,
  InvalidRequestError,
  NotSentError,
  TransferAbortedError,
  type TransferResult,
} from '../../src/client/index.js';
import { waitFor } from '../support/waitFor.js';

/** One scripted reply of the fake relay. */
type Step =
  /** `retryAfter`: the reply's Retry-After header, when it has one. */
  | { readonly kind: 'code'; readonly code: string; readonly http: number; readonly replayed: boolean; readonly retryAfter?: string }
  /** A proxy's page: not contract-shaped. */
  | { readonly kind: 'garbage' }
  /** The connection is reset after the request arrived. */
  | { readonly kind: 'reset' }
  /** No answer until the client gives up. */
  | { readonly kind: 'hang' };

// The contract's codes with the HTTP status the relay sends them with (CONTRACT.md §2, §6).
const CODES: ReadonlyArray<readonly [string, number]> = [
  ['0000', 200], ['B201', 200], ['B202', 200], ['E500', 200],
  ['E901', 504], ['E902', 503], ['E903', 409], ['E503', 503],
  ['E400', 400], ['E401', 401], ['E403', 403], ['E904', 422], ['E905', 410],
  // A definite code on another status is not the relay's answer.
  ['0000', 502],
];

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      // A Retry-After of nothing, zero, a malformed one, or one second (more than any maxWait here: the call must end).
      .record({ pick: fc.constantFrom(...CODES), replayed: fc.boolean(), retryAfter: fc.constantFrom(undefined, undefined, '0', 'soon', '1') })
      .map(({ pick, replayed, retryAfter }) => ({ kind: 'code' as const, code: pick[0], http: pick[1], replayed, ...(retryAfter === undefined ? {} : { retryAfter }) })),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'garbage' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'reset' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'hang' as const }) },
);

/** What the contract says a channel must make of a reply: the test's own statement of it, not the client's table. */
function meaning(step: Step): 'definite' | 'refused' | 'maybe-sent' | 'not-sent' {
  if (step.kind !== 'code') return 'maybe-sent';
  if (/^(0000|B2\d\d|E500)$/.test(step.code)) return step.http === 200 ? 'definite' : 'maybe-sent';
  if (['E400', 'E401', 'E403', 'E904', 'E905'].includes(step.code)) return 'refused';
  if (['E902', 'E503'].includes(step.code)) return 'not-sent';
  return 'maybe-sent';
}

/** After the script, the relay keeps saying "in progress". */
const AFTER_SCRIPT: Step = { kind: 'code', code: 'E903', http: 409, replayed: false };

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', () => resolve(Buffer.concat(chunks)));
  });
}

describe('guidgate/client over arbitrary relay replies (a scripted relay on loopback)', () => {
  let server: Server;
  let url = '';
  let script: Step[] = [];
  let served: Step[] = [];
  let bodies: Buffer[] = [];
  let authorizations: Array<string | undefined> = [];
  /** By the server's monotonic clock: when each request arrived, and when its reply was written (NaN: none). */
  let arrived: number[] = [];
  let replied: number[] = [];
  const sockets = new Set<Socket>();

  beforeAll(async () => {
    server = createServer((req, res) => {
      arrived.push(performance.now());
      const index = arrived.length - 1;
      replied[index] = Number.NaN;
      void readBody(req).then((body) => {
        bodies.push(body);
        authorizations.push(req.headers.authorization);
        const step = script[served.length] ?? AFTER_SCRIPT;
        served.push(step);
        if (step.kind === 'hang') return;
        if (step.kind === 'reset') return req.socket.resetAndDestroy();
        if (step.kind === 'garbage') return res.writeHead(502, { 'content-type': 'text/html' }).end('<html>bad gateway</html>');
        const guid = (JSON.parse(body.toString()) as { guid: string }).guid;
        const extra = step.code === 'E400' ? { field: 'amount' } : step.code === 'E905' ? { originalCode: '0000' } : {};
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (step.replayed) headers['idempotent-replayed'] = 'true';
        if (step.retryAfter !== undefined) headers['retry-after'] = step.retryAfter;
        replied[index] = performance.now();
        res.writeHead(step.http, headers).end(JSON.stringify({ guid, code: step.code, message: `scripted ${step.code}`, ...extra }));
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

  it('never changes the GUID or the bytes, never says failed after a maybe-sent reply, and stops by maxWait', async () => {
    let runs = 0;
    // A time budget that lets the run in progress finish (fast-check's interrupt would leave it sending). About 80
    // sequences fit in it on an idle 2-core machine; the first MIN_SEQUENCES run however long they take.
    const MIN_SEQUENCES = 40;
    const budgetEnds = Date.now() + 12_000;
    await fc.assert(
      fc.asyncProperty(
        fc.array(stepArb, { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 250, max: 800 }),
        fc.option(fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,20}$/), { nil: undefined }),
        async (steps, maxWait, guid) => {
          if (runs >= MIN_SEQUENCES && Date.now() > budgetEnds) return;
          runs++;
          script = steps;
          served = [];
          bodies = [];
          authorizations = [];
          arrived = [];
          replied = [];
          const reports: string[] = [];
          const client = createClient({ baseUrl: url, token: 'tok-123', timeout: 200, maxWait, backoff: { initialMs: 5, maxMs: 40 }, onAttempt: (a) => void reports.push(a.reply) });
          const input = { ...(guid === undefined ? {} : { guid }), from: 'A-1', to: 'B-2', amount: 42, currency: 'CNY', note: { any: ['json'] } };
          const started = Date.now();
          let result: TransferResult | undefined;
          let error: unknown;
          try {
            result = await client.transfer(input);
          } catch (e) {
            error = e;
          }
          const elapsed = Date.now() - started;
          await client.close();
          // A request the client wrote just before giving up may reach the server a moment later: all it wrote has
          // been read once the server has seen each of its connections close.
          await waitFor(() => sockets.size === 0, { what: "the client's connections closed at the server" });

          // Stops by maxWait (plus the lag of a loaded event loop).
          expect(elapsed).toBeLessThanOrEqual(maxWait + 250);
          // One GUID, one body: every send carried the first send's bytes.
          expect(bodies.length).toBeGreaterThanOrEqual(1);
          for (const b of bodies) expect(b.equals(bodies[0]!)).toBe(true);
          expect(new Set(authorizations)).toEqual(new Set(['Bearer tok-123']));
          const sentGuid = (JSON.parse(bodies[0]!.toString()) as { guid: string }).guid;
          if (guid !== undefined) expect(sentGuid).toBe(guid);
          expect(result?.guid ?? (error as { guid?: string }).guid).toBe(sentGuid);
          // Every attempt reached the scripted relay, and nothing else did; but the last, cut to what was left of
          // maxWait, may time out before its request is written (a loaded machine: seen in a fresh-clone run).
          const lastUnsent = served.length === reports.length - 1 && reports.at(-1) === 'timeout';
          if (!lastUnsent) expect(served.length).toBe(reports.length);
          // No resend came sooner than the Retry-After of the reply before it, as far as the client heard that reply.
          for (let i = 0; i + 1 < served.length; i++) {
            const step = served[i]!;
            const waitS = step.kind === 'code' && step.retryAfter !== undefined && /^\d+$/.test(step.retryAfter) ? Number(step.retryAfter) : 0;
            if (waitS > 0 && reports[i] === (step.kind === 'code' ? step.code : '')) expect(arrived[i + 1]! - replied[i]!).toBeGreaterThanOrEqual(waitS * 1000);
          }

          // The contract, replayed over what the relay answered, as far as the client heard it: a reply that came
          // after the client's own timeout (a loaded machine) was not heard, and counts as maybe sent.
          let maybeSent = false;
          for (let i = 0; i < served.length; i++) {
            const heard = !['timeout', 'connection'].includes(reports[i]!);
            const step: Step = heard ? served[i]! : { kind: 'hang' };
            if (heard) expect(reports[i]).toBe(step.kind === 'code' ? step.code : 'HTTP 502');
            const m = meaning(step);
            const last = i === served.length - 1;
            if (m === 'definite' && step.kind === 'code') {
              expect(last).toBe(true);
              expect(error).toBeUndefined();
              expect(result).toMatchObject({ status: 'definite', code: step.code, replayed: step.replayed, attempts: i + 1 });
              return;
            }
            if (m === 'refused' && step.kind === 'code') {
              expect(last).toBe(true);
              if (maybeSent && step.code !== 'E905') {
                expect(error).toBeUndefined();
                expect(result).toMatchObject({ status: 'unknown', lastReply: step.code });
              } else {
                expect(result).toBeUndefined();
                const expected = { E400: InvalidRequestError, E401: AuthError, E403: AuthError, E904: GuidReusedError, E905: GuidExpiredError }[step.code]!;
                expect(error).toBeInstanceOf(expected);
                expect(error).toMatchObject({ code: step.code });
                if (step.code === 'E400') expect(error).toMatchObject({ field: 'amount' });
                if (step.code === 'E905') expect(error).toMatchObject({ originalCode: '0000' });
              }
              return;
            }
            if (m === 'maybe-sent') maybeSent = true;
          }
          // maxWait ran out: unknown once anything may have been sent, else certainly not applied.
          if (maybeSent) {
            expect(error).toBeUndefined();
            expect(result).toMatchObject({ status: 'unknown', attempts: served.length });
          } else {
            expect(result).toBeUndefined();
            expect(error).toBeInstanceOf(NotSentError);
          }
        },
      ),
      { numRuns: 300 },
    );
    console.log(`client property: ${runs} reply sequences`);
    expect(runs, 'reply sequences run').toBeGreaterThanOrEqual(MIN_SEQUENCES);
  }, 120_000);

  it('cancels through an AbortSignal: not applied before any maybe-sent reply, unknown after one', async () => {
    let afterAttempt = (_n: number): void => {};
    const client = createClient({ baseUrl: url, timeout: 1_000, maxWait: 5_000, backoff: { initialMs: 50, maxMs: 50 }, onAttempt: (a) => afterAttempt(a.attempt) });
    const abortAfter = (n: number): AbortSignal => {
      const c = new AbortController();
      afterAttempt = (k) => (k === n ? c.abort() : undefined);
      return c.signal;
    };
    const replies = (code: string, http: number): Step[] => Array.from({ length: 5 }, () => ({ kind: 'code' as const, code, http, replayed: false }));
    try {
      // Aborted before the call: nothing is sent.
      served = [];
      script = [];
      await expect(client.transfer({ from: 'A', to: 'B', amount: 1 }, { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(TransferAbortedError);
      expect(served).toEqual([]);

      // Only "not sent" so far, aborted while waiting to resend: certainly not applied.
      script = replies('E902', 503);
      served = [];
      await expect(client.transfer({ from: 'A', to: 'B', amount: 1 }, { signal: abortAfter(2) })).rejects.toBeInstanceOf(TransferAbortedError);
      expect(served.length).toBe(2);

      // After "in progress", aborting cannot make it a failure.
      script = replies('E902', 503).slice(0, 1).concat(replies('E903', 409));
      served = [];
      expect(await client.transfer({ from: 'A', to: 'B', amount: 1 }, { signal: abortAfter(2) })).toMatchObject({ status: 'unknown', attempts: 2 });
      expect(served.length).toBe(2);

      // Aborted while a send is in flight: it may have arrived.
      script = [{ kind: 'hang' }];
      served = [];
      afterAttempt = () => {};
      expect(await client.transfer({ from: 'A', to: 'B', amount: 1 }, { signal: AbortSignal.timeout(100) })).toMatchObject({ status: 'unknown', lastReply: 'aborted' });
    } finally {
      await client.close();
    }
  });
});
