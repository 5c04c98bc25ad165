import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { serve } from '../../src/wiring/serve.js';
import { startSimulator } from '../../src/simulator/index.js';
import { startAccountSpy, type AccountSpy } from '../support/accountSpy.js';
import { parseTraceparent, type SeenCall } from '../support/otlpReceiver.js';
import { httpRequest, transfer } from '../support/relayHarness.js';
import { runToEnd, spawnNode } from '../support/children.js';
import { BIN } from '../support/serveProcess.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';

const CHANNEL_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CHANNEL_SPAN = '00f067aa0ba902b7';
const channelParent = (traceId = CHANNEL_TRACE, spanId = CHANNEL_SPAN, flags = '01') => `00-${traceId}-${spanId}-${flags}`;

/**
 * Trace context (CONTRACT.md §10) through the real relay (`serve` on a SQLite file) and the bundled account
 * simulator behind a spy that records the trace headers each call carried, all over loopback sockets; the later
 * inquiry is made by `guidgate resolve`, a process of its own (the built command).
 */
describe('trace context from the channel to the account system', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  async function relayWithSpy(): Promise<{ url: string; db: string; spy: AccountSpy }> {
    const dir = tmp();
    const sim = cleanup.use(await startSimulator({ port: 0, faults: { byGuidPrefix: { 'hole-': 'hold' } } }));
    const spy = cleanup.use(await startAccountSpy(sim.url));
    const db = join(dir, 'ledger.db');
    const relay = cleanup.use(await serve({
      port: 0, host: '127.0.0.1', db, accountUrl: spy.url, timeoutMs: 300, graceMs: 1000, maxAttempts: 3, settleEveryMs: 0,
      synchronous: 'FULL', busyTimeoutMs: 1000, logLevel: 'silent', out: () => {},
    }));
    return { url: relay.url, db, spy };
  }

  const post = (url: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(body), headers });
  const callsFor = (spy: AccountSpy, guid: string, method: 'GET' | 'POST'): SeenCall[] =>
    spy.calls.filter((c) => c.method === method && (method === 'GET' ? c.url.endsWith(`/transfer/${encodeURIComponent(guid)}`) : true));

  it('continues a valid traceparent: the POST and a later inquiry by resolve carry its trace id under parent ids of their own', async () => {
    const { url, db, spy } = await relayWithSpy();
    // A transfer answered at once: its POST continues the channel's trace, the tracestate passed on.
    const body = transfer();
    const r = await post(url, body, { traceparent: channelParent(), tracestate: 'congo=t61rcWkgMzE' });
    expect(r.status).toBe(200);
    const [sent] = spy.calls;
    const got = parseTraceparent(sent?.traceparent);
    expect(got, `POST /transfer carried ${sent?.traceparent}`).not.toBeNull();
    expect(got!.traceId).toBe(CHANNEL_TRACE);
    expect(got!.parentId).not.toBe(CHANNEL_SPAN);
    expect(got!.flags).toBe('01');
    expect(sent!.tracestate).toBe('congo=t61rcWkgMzE');

    // A transfer the account system never answers (UNKNOWN), under another trace; `resolve` asks about it later.
    const otherTrace = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
    const held = transfer({ guid: `hole-${process.pid}-${Date.now()}` });
    const unknown = await post(url, held, { traceparent: channelParent(otherTrace, '1111111111111111') });
    expect(unknown.json().code).toBe('E901');
    const heldPost = parseTraceparent(spy.calls.at(-1)?.traceparent);
    expect(heldPost?.traceId).toBe(otherTrace);

    const resolved = await runToEnd(spawnNode(BIN, ['resolve', '--account-url', spy.url, '--min-age', '1ms', '--grace', '500ms', '--db', db, '--json']));
    expect(resolved.code, resolved.stderr).toBe(0);
    const inquiries = callsFor(spy, String(held.guid), 'GET');
    expect(inquiries).toHaveLength(1);
    const asked = parseTraceparent(inquiries[0]!.traceparent);
    expect(asked, `the inquiry carried ${inquiries[0]!.traceparent}`).not.toBeNull();
    // The trace of the transfer's first request, continued by another process, from a span of its own.
    expect(asked!.traceId).toBe(otherTrace);
    expect(asked!.parentId).not.toBe('1111111111111111');
    expect(asked!.parentId).not.toBe(heldPost!.parentId);
  });

  it('starts a trace when the channel sends none, and ignores an invalid traceparent (a new trace, never an error)', async () => {
    const { url, spy } = await relayWithSpy();
    const none = await post(url, transfer());
    expect(none.status).toBe(200);
    const fresh = parseTraceparent(spy.calls.at(-1)?.traceparent);
    expect(fresh, `POST /transfer carried ${spy.calls.at(-1)?.traceparent}`).not.toBeNull();

    const invalid = [
      'garbage',
      `00-${'0'.repeat(32)}-${CHANNEL_SPAN}-01`, // all-zero trace id
      `00-${CHANNEL_TRACE}-${'0'.repeat(16)}-01`, // all-zero parent id
      `ff-${CHANNEL_TRACE}-${CHANNEL_SPAN}-01`, // version ff is forbidden
      `00-${CHANNEL_TRACE.toUpperCase()}-${CHANNEL_SPAN}-01`, // upper case
      `00-${CHANNEL_TRACE}-${CHANNEL_SPAN}-01-extra`, // version 00 has no more fields
    ];
    const seen = new Set<string>([fresh!.traceId]);
    for (const header of invalid) {
      const r = await post(url, transfer(), { traceparent: header });
      expect(r.status, header).toBe(200);
      expect(r.json().code, header).toBe('0000');
      const got = parseTraceparent(spy.calls.at(-1)?.traceparent);
      expect(got, `${header} → ${spy.calls.at(-1)?.traceparent}`).not.toBeNull();
      expect(got!.traceId, header).not.toBe(CHANNEL_TRACE);
      // A new trace each time.
      expect(seen.has(got!.traceId), header).toBe(false);
      seen.add(got!.traceId);
    }
  });
});
