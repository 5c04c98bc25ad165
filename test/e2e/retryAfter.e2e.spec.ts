/**
 * `Retry-After` on every "not sent" reply (#28): E902 from a refused connection or the attempt cap (a wait that grows
 * with the row's attempts), E902 from the open breaker (its remaining cooldown), E503 when the ledger is unavailable.
 * The real `serve` on a real ledger file, over loopback sockets. And the promise it serves: guidgate/client, honouring
 * it, no longer spends a transfer's whole cap inside a short outage.
 */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { freePort } from '../support/children.js';
import { startHarness, transfer, type Harness } from '../support/relayHarness.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

describe('Retry-After on every E902 and E503 (real serve, real sockets)', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const harness = async (opts: Parameters<typeof startHarness>[1] = {}): Promise<Harness> => cleanup.use(await startHarness(tmp(), opts));
  /** An account URL nothing listens on: every call is a refused connection (FAILED, E902). */
  const nowhere = async () => `http://127.0.0.1:${await freePort()}`;
  const seen = (r: { status: number; headers: Record<string, string | string[] | undefined>; json(): Record<string, unknown> }) =>
    [r.status, r.json()['code'], r.headers['retry-after']];

  it('a refused connection: E902 with a wait that grows with the row\'s attempts (1, 2, 4 s); a resend under the cap is still sent at once; at the cap, no call', async () => {
    const h = await harness({ relay: { accountUrl: await nowhere(), maxAttempts: 3, breakerFailures: 0 } });
    const body = JSON.stringify(transfer());
    const guid = String(JSON.parse(body).guid);
    const attempts = async () => (await h.get(`/v1/transfers/${guid}`)).json()['attempts'];
    const replies: unknown[] = [];
    const attemptsAfter: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      // Each resend at once, long before the Retry-After: the contract still sends a FAILED row under the cap.
      replies.push(seen(await h.post(body)));
      attemptsAfter.push(await attempts());
    }
    expect(replies).toEqual([[503, 'E902', '1'], [503, 'E902', '2'], [503, 'E902', '4'], [503, 'E902', '4']]);
    expect(attemptsAfter).toEqual([1, 2, 3, 3]);
    expect((await h.post(body)).json()['message']).toMatch(/attempt cap \(3\) is used up/);
  }, 30_000);

  it("the open breaker: E902 with its remaining cooldown, nothing stored; a definite answer carries no Retry-After", async () => {
    const h = await harness({ relay: { accountUrl: await nowhere(), breakerFailures: 1, breakerCooldownMs: 30_000 } });
    expect(seen(await h.post(JSON.stringify(transfer())))).toEqual([503, 'E902', '1']);
    const refused = transfer();
    const r = await h.post(JSON.stringify(refused));
    expect([r.status, r.json()['code'], r.json()['message']]).toEqual([503, 'E902', expect.stringMatching(/breaker open/)]);
    // 30 s of cooldown, a few ms of it spent: 30 (29 on a machine slow enough to spend a second here).
    expect(['29', '30']).toContain(r.headers['retry-after']);
    expect((await h.get(`/v1/transfers/${String(refused['guid'])}`)).status).toBe(404);

    const ok = await harness();
    const done = await ok.post(JSON.stringify(transfer()));
    expect([done.status, done.json()['code'], done.headers['retry-after']]).toEqual([200, '0000', undefined]);
  }, 30_000);

  it('the ledger unavailable: E503 with a Retry-After, and /healthz 503 with one too', async () => {
    const h = await harness();
    expect((await h.post(JSON.stringify(transfer()))).json()['code']).toBe('0000');
    for (const f of [h.db, `${h.db}-wal`, `${h.db}-shm`]) rmSync(f, { force: true });
    await waitFor(async () => (await h.get('/healthz')).status === 503, { what: 'the lost ledger noticed' });
    expect(seen(await h.post(JSON.stringify(transfer())))).toEqual([503, 'E503', '1']);
    const health = await h.get('/healthz');
    expect([health.status, health.headers['retry-after']]).toEqual([503, '1']);
    expect(h.sim.stats().totalCalls).toBe(1);
  }, 30_000);

  it('guidgate/client through a 3 s outage (the issue\'s case): it waits as told, the transfer is applied once, and no dead letter', async () => {
    const h = await harness({ relay: { maxAttempts: 5, breakerFailures: 0 } });
    const client = cleanup.use(createClient({ baseUrl: h.relay.url, timeout: 2_000, maxWait: 20_000, backoff: { initialMs: 100, maxMs: 400 } }));
    const outage = h.sim.refuseConnections(3_000);
    const input = { guid: `outage-${Date.now()}`, from: '6222021001', to: '6222021002', amount: 1500, currency: 'CNY' };
    const result = await client.transfer(input);
    await outage;
    expect(result).toMatchObject({ status: 'definite', code: '0000' });
    const row = (await h.get(`/v1/transfers/${input.guid}`)).json();
    // Without Retry-After, a 100 ms backoff spent all five attempts in about 1.4 s and the row became a dead letter.
    expect(row['status']).toBe('DONE');
    expect(Number(row['attempts'])).toBeLessThan(5);
    expect(h.sim.guidStats(input.guid).applied).toBe(1);
  }, 30_000);
});
