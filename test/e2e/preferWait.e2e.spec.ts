/**
 * `Prefer: wait=N` (CONTRACT.md §2) on real processes: relays sharing one ledger (a SQLite file; a PostgreSQL
 * database), a call held in flight by relay A, resends to relays B and C. A resend that may wait is answered once
 * the outcome is recorded, by A (another process) or by the relay itself, with the stored bytes and
 * `Preference-Applied`; without the preference, over `--max-waiters`, with a value outside 1–30: E903 at once.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { transferBody } from '../support/commandsSeed.js';
import { startGatedAccount, type GatedAccount } from '../support/gatedAccount.js';
import { postgresForTests, useTestDatabases } from '../support/pg.js';
import { exited, startServe } from '../support/serveProcess.js';
import { metricAt, sigkillAndWait } from '../support/settle.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

const { available: pgAvailable } = await postgresForTests();

interface Answer {
  readonly status: number;
  readonly code: string;
  readonly body: string;
  readonly applied: string | null;
  readonly replayed: string | null;
  readonly ms: number;
}

/** A channel's POST of `guid` to `url`, with `Prefer` when given. */
async function post(url: string, guid: string, prefer?: string, signal?: AbortSignal): Promise<Answer> {
  const started = performance.now();
  const res = await fetch(`${url}/v1/transfers`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(prefer === undefined ? {} : { prefer }) },
    body: transferBody(guid).body,
    ...(signal === undefined ? {} : { signal }),
  });
  const body = await res.text();
  return {
    status: res.status, body, code: (JSON.parse(body) as { code: string }).code,
    applied: res.headers.get('preference-applied'), replayed: res.headers.get('idempotent-replayed'), ms: performance.now() - started,
  };
}

/** serve's flags for a call the test holds: a timeout past the test's end, a send window of 10 s, no background settling. */
const HELD_CALL = ['--timeout', '30s', '--grace', '20s', '--settle-every', '0'];

const waiting = (url: string) => metricAt(url, 'guidgate_waiting_requests');

function scenario(store: string, ledger: () => Promise<string>): void {
  const cleanup = useCleanup();
  const relay = async (db: string, accountUrl: string, extra: string[] = []): Promise<{ url: string; child: ChildProcess }> => {
    // A call timeout far longer than the test: the held call keeps the row SENT until the test answers it. A grace
    // whose send window (half of it) outlasts a claim's sync on a loaded machine: a claim acknowledged past the window
    // is not called (E902), and the test would wait for a call that never comes.
    const r = startServe(['--db', db, '--account-url', accountUrl, ...HELD_CALL, ...extra]);
    cleanup.add(() => sigkillAndWait(r.child));
    return { url: await r.ready, child: r.child };
  };

  it(`${store}: a resend to another relay waits for the outcome A records, and answers with its bytes and Preference-Applied; without it, over --max-waiters, past N: E903`, async () => {
    const account: GatedAccount = cleanup.use(await startGatedAccount());
    const db = await ledger();
    const [a, b, c] = await Promise.all([relay(db, account.url), relay(db, account.url), relay(db, account.url, ['--max-waiters', '1'])]);
    const guid = `WAIT-${store}-1`;
    const first = post(a.url, guid);
    await waitFor(() => account.calls(guid) === 1, { what: 'the call in flight from relay A' });

    // Without the preference, and with a value RFC 7240 says to ignore: E903 at once.
    for (const prefer of [undefined, 'wait=31', 'wait=0', 'wait=abc']) {
      const now = await post(b.url, guid, prefer);
      expect([now.status, now.code, now.applied], String(prefer)).toEqual([409, 'E903', null]);
      expect(now.ms).toBeLessThan(1000);
    }
    // Still in progress after N seconds: E903, having waited.
    const expired = await post(b.url, guid, 'wait=1');
    expect([expired.status, expired.code, expired.applied]).toEqual([409, 'E903', 'wait=1']);
    expect(expired.ms).toBeGreaterThanOrEqual(950);

    // C lets one wait at once: a second gets E903 at once, without Preference-Applied.
    const onC = post(c.url, guid, 'wait=20');
    await waitFor(async () => (await waiting(c.url)) === 1, { what: 'one request waiting on C' });
    const overC = await post(c.url, guid, 'wait=20');
    expect([overC.status, overC.code, overC.applied]).toEqual([409, 'E903', null]);
    // Waiting on B (hears of A's write by reading the ledger) and on A itself (hears of its own write).
    const onB = post(b.url, guid, 'respond-async, wait=20; x=y');
    const onA = post(a.url, guid, 'wait=20');
    await waitFor(async () => (await waiting(b.url)) === 1 && (await waiting(a.url)) === 1, { what: 'a request waiting on A and on B' });

    // The account system answers with bytes no serialiser would make: the stored answer goes back as it came.
    const stored = `{"code":"0000",  "guid":"${guid}","ref":"J-77" , "note":"exact bytes"}`;
    const released = performance.now();
    account.release(guid, stored);
    const [fromA, fromB, fromC] = await Promise.all([onA, onB, onC]);
    expect(await first).toMatchObject({ status: 200, code: '0000', body: stored, applied: null });
    for (const [name, r] of [['A', fromA], ['B', fromB], ['C', fromC]] as const) {
      expect({ name, status: r.status, body: r.body, applied: r.applied, replayed: r.replayed }).toEqual({ name, status: 200, body: stored, applied: 'wait=20', replayed: 'true' });
    }
    // Well before the 20 s: the outcome, not the time limit, ended each wait.
    expect(performance.now() - released).toBeLessThan(3000);
    expect(account.calls(guid)).toBe(1);
    expect(await waiting(b.url)).toBe(0);

    // A first send and a resend of a settled GUID are unchanged by the preference.
    const settled = await post(b.url, guid, 'wait=5');
    expect([settled.body, settled.applied, settled.replayed]).toEqual([stored, null, 'true']);
  }, 60_000);

  it(`${store}: a channel that leaves gives its place back; SIGTERM answers a waiting request at once`, async () => {
    const account: GatedAccount = cleanup.use(await startGatedAccount());
    const db = await ledger();
    const [a, b] = await Promise.all([relay(db, account.url), relay(db, account.url, ['--max-waiters', '1'])]);
    const guid = `WAIT-${store}-2`;
    void post(a.url, guid).catch(() => undefined);
    await waitFor(() => account.calls(guid) === 1, { what: 'the call in flight from relay A' });

    const leaving = new AbortController();
    const left = post(b.url, guid, 'wait=30', leaving.signal).catch(() => 'aborted');
    await waitFor(async () => (await waiting(b.url)) === 1, { what: 'one request waiting on B' });
    leaving.abort();
    expect(await left).toBe('aborted');
    await waitFor(async () => (await waiting(b.url)) === 0, { what: 'the place given back' });

    const held = post(b.url, guid, 'wait=30');
    await waitFor(async () => (await waiting(b.url)) === 1, { what: 'one request waiting on B again' });
    const stopping = performance.now();
    b.child.kill('SIGTERM');
    const answered = await held;
    expect([answered.status, answered.code, answered.applied]).toEqual([409, 'E903', 'wait=30']);
    expect(performance.now() - stopping).toBeLessThan(5000);
    expect(await exited(b.child)).toBe(0);
    account.release(guid, `{"code":"0000","guid":"${guid}"}`);
  }, 60_000);
}

describe('Prefer: wait across relays on one SQLite file', () => {
  const tmp = useTempDir();
  scenario('sqlite', async () => join(tmp(), 'ledger.db'));

  const cleanup = useCleanup();
  it('guidgate/client asks for a wait that fits its timeout: a GUID in flight at another relay ends definite in one attempt; with wait: false it resends', async () => {
    const account: GatedAccount = cleanup.use(await startGatedAccount());
    const db = join(tmp(), 'ledger.db');
    const relays = await Promise.all([0, 1].map(async () => {
      const r = startServe(['--db', db, '--account-url', account.url, ...HELD_CALL]);
      cleanup.add(() => sigkillAndWait(r.child));
      return r.ready;
    }));
    const [a, b] = relays as [string, string];
    const input = JSON.parse(transferBody('WAIT-CLIENT-1').body) as { guid: string; from: string; to: string; amount: number };
    void post(a, input.guid).catch(() => undefined);
    await waitFor(() => account.calls(input.guid) === 1, { what: 'the call in flight from relay A' });

    const replies: string[] = [];
    const client = createClient({ baseUrl: b, timeout: 5_000, maxWait: 20_000, onAttempt: (r) => replies.push(r.reply) });
    const impatient: string[] = [];
    const noWait = createClient({ baseUrl: b, timeout: 5_000, maxWait: 20_000, wait: false, backoff: { initialMs: 50, maxMs: 100 }, onAttempt: (r) => impatient.push(r.reply) });
    cleanup.add(() => client.close());
    cleanup.add(() => noWait.close());
    const waited = client.transfer(input);
    const resent = noWait.transfer(input);
    await waitFor(async () => (await waiting(b)) === 1 && impatient.length >= 2, { what: 'the client waiting on B, the other resending' });
    const stored = `{"code":"0000","guid":"${input.guid}","ref":"C-1"}`;
    account.release(input.guid, stored);
    expect(await waited).toMatchObject({ status: 'definite', code: '0000', replayed: true, body: stored, attempts: 1 });
    expect(replies).toEqual(['0000']);
    expect(await resent).toMatchObject({ status: 'definite', code: '0000', body: stored });
    expect(impatient.slice(0, 2)).toEqual(['E903', 'E903']);
  }, 60_000);
});

describe.skipIf(!pgAvailable)('Prefer: wait across relays on one PostgreSQL database', () => {
  const dbs = useTestDatabases();
  scenario('postgres', () => dbs.fresh());
});
