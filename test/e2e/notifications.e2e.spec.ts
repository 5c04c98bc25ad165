/**
 * CONTRACT.md §11: a transfer whose outcome the channel was not given in its reply is notified, signed, once it
 * settles; a dead letter too; an outcome the channel's own reply carried is not. Real relays (bin/guidgate serve),
 * the bundled simulator, a real HTTP receiver on loopback.
 */
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startSimulator } from '../../src/simulator/index.js';
import { openLedger } from '../support/ledgerStore.js';
import { orThrow } from '../../src/events/storeResult.js';
import { cli, transferBody } from '../support/commandsSeed.js';
import { killChildren, sigkill, spawnServe, type ServeProcess } from '../support/scheduleProcess.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { waitFor } from '../support/waitFor.js';
import { signatureValid, startReceiver, type Received } from '../support/webhookReceiver.js';
import { postgresForTests, useTestDatabases } from '../support/pg.js';
import { makePki } from '../support/certs.js';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

const { available: pgAvailable } = await postgresForTests();

const SECRET = 'a-signing-secret-of-thirty-two-b';

interface Body {
  type: string;
  guid: string;
  status: string;
  code: string;
  attempts: number;
  channel: string | null;
  at: string;
  response: string | null;
}

async function post(url: string, guid: string): Promise<{ status: number; text: string; code: string }> {
  const res = await fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: transferBody(guid).body });
  const text = await res.text();
  return { status: res.status, text, code: (JSON.parse(text) as { code: string }).code };
}

const bodyOf = (r: Received): Body => JSON.parse(r.body) as Body;
const HOUR = 3_600_000;

describe('notifications (serve --notify-url)', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  afterAll(() => killChildren());

  function secretFile(): { path: string; secret: Buffer } {
    const path = join(tmp(), 'notify.secret');
    writeFileSync(path, `${SECRET}\n`);
    chmodSync(path, 0o600);
    return { path, secret: Buffer.from(SECRET) };
  }

  async function relay(db: string, accountUrl: string, receiverUrl: string, extra: string[] = []): Promise<ServeProcess> {
    const p = await spawnServe(['--db', db, '--account-url', accountUrl, '--notify-url', receiverUrl, '--notify-secret-file', secretFile().path, '--timeout', '1s', ...extra]);
    cleanup.add(() => sigkill(p));
    return p;
  }

  /** The notifications the receiver got for `guid`. */
  const forGuid = (received: readonly Received[], guid: string) => received.filter((r) => bodyOf(r).guid === guid);

  it('E901 to the channel, then settled by the settler, by resolve and by reconcile --settle: one signed transfer.settled each, its response what a resend gets; a 0000 in the reply: none', async () => {
    const sim = cleanup.use(await startSimulator({ port: 0, faults: { byGuidPrefix: { 'N-RESET': 'reset' } } }));
    const receiver = cleanup.use(await startReceiver());
    const { secret } = secretFile();
    const db = join(tmp(), 'ledger.db');

    // The settler: the relay settles the UNKNOWN row by inquiry in the background.
    const a = await relay(db, sim.url, receiver.url, ['--settle-every', '100ms', '--min-age', '300ms']);
    const ordinary = await post(a.url, 'N-OK-1');
    expect(ordinary.code).toBe('0000');
    const first = await post(a.url, 'N-RESET-settler');
    expect(first.code).toBe('E901');
    await waitFor(() => forGuid(receiver.received, 'N-RESET-settler').length > 0, { timeoutMs: 20_000, what: 'the settler\'s notification' });
    // Killed once it has recorded the delivery (killed before, its lease would run out and the next relay send it again).
    const store = cleanup.use(openLedger(db));
    await waitFor(async () => (await orThrow(store.listNotifications({ guid: 'N-RESET-settler', limit: 1 })))[0]?.state === 'delivered', { what: 'the delivery recorded' });
    await sigkill(a);

    // resolve and reconcile --settle, with a relay that delivers but does not settle.
    const b = await relay(db, sim.url, receiver.url, ['--settle-every', '0']);
    expect((await post(b.url, 'N-RESET-resolve')).code).toBe('E901');
    const resolved = await cli(['resolve', '--db', db, '--account-url', sim.url, '--min-age', '1ms']);
    expect(resolved.code, resolved.stderr).toBe(0);
    expect((await post(b.url, 'N-RESET-reconcile')).code).toBe('E901');
    const now = Date.now();
    const reconciled = await cli(['reconcile', '--db', db, '--account-url', sim.url, '--from', String(now - HOUR), '--to', String(now + HOUR), '--pending', '0', '--settle']);
    expect(reconciled.stdout).toMatch(/^settle N-RESET-reconcile /m);
    await waitFor(() => forGuid(receiver.received, 'N-RESET-resolve').length > 0 && forGuid(receiver.received, 'N-RESET-reconcile').length > 0, { timeoutMs: 20_000, what: 'the notifications of resolve and reconcile' });

    for (const guid of ['N-RESET-settler', 'N-RESET-resolve', 'N-RESET-reconcile']) {
      const got = forGuid(receiver.received, guid);
      expect(got, guid).toHaveLength(1);
      const n = got[0]!;
      expect(signatureValid(secret, n), `${guid}: signature`).toBe(true);
      expect(signatureValid(Buffer.from('another-secret-of-thirty-two-by'), n)).toBe(false);
      expect(Math.abs(Number(n.timestamp) - Date.now() / 1000)).toBeLessThan(60);
      const body = bodyOf(n);
      console.log(`${guid}: delivered ${n.at - Date.parse(body.at)} ms after the settling event`);
      expect(body).toMatchObject({ type: 'transfer.settled', guid, status: 'DONE', code: '0000', attempts: 1, channel: null });
      expect(Object.keys(body).sort()).toEqual(['at', 'attempts', 'channel', 'code', 'guid', 'response', 'status', 'type']);
      expect(n.id).toMatch(new RegExp(`^${guid}:\\d+$`));
      // The stored answer, byte for byte what a resend of the GUID gets.
      const resend = await post(b.url, guid);
      expect(resend.code).toBe('0000');
      expect(body.response).toBe(resend.text);
    }
    // The ordinary transfer's outcome was in its reply: nothing for it, nor for the resends above.
    expect(forGuid(receiver.received, 'N-OK-1')).toHaveLength(0);
    // Recorded delivered once the relay has written the attempts of its page.
    const all = await waitFor(async () => {
      const rows = await orThrow(store.listNotifications({ limit: 100 }));
      return rows.every((n) => n.state === 'delivered') ? rows : null;
    }, { what: 'every notification recorded delivered' });
    expect(all.map((n) => n.guid).sort()).toEqual(['N-RESET-reconcile', 'N-RESET-resolve', 'N-RESET-settler']);

    // The command line lists them, and queues one again: the same webhook-id, the same body.
    const listed = await cli(['notifications', '--db', db, '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const views = JSON.parse(listed.stdout) as Array<{ webhookId: string; state: string; type: string }>;
    expect(views.map((v) => v.state)).toEqual(['delivered', 'delivered', 'delivered']);
    expect((await cli(['notifications', '--db', db, '--pending', '--json'])).stdout.trim()).toBe('[]');
    const before = forGuid(receiver.received, 'N-RESET-resolve')[0]!;
    const again = await cli(['notifications', 'redeliver', 'N-RESET-resolve', 'N-NONE', '--db', db]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/no notification recorded for N-NONE/);
    expect(again.stdout).toMatch(/^1 notification queued again/m);
    await waitFor(() => forGuid(receiver.received, 'N-RESET-resolve').length === 2, { timeoutMs: 15_000, what: 'the redelivery' });
    const redelivered = forGuid(receiver.received, 'N-RESET-resolve')[1]!;
    expect(redelivered.id).toBe(before.id);
    expect(redelivered.body).toBe(before.body);
    expect(signatureValid(secret, redelivered)).toBe(true);
    const history = await cli(['history', 'N-RESET-resolve', '--db', db]);
    expect(history.stdout.match(/notification +transfer\.settled webhook-id N-RESET-resolve:\d+: delivered \(HTTP 204/g)).toHaveLength(2);
    // The metrics of the relay that delivered: two deliveries by it at least, none pending.
    const metrics = await (await fetch(`${b.url}/metrics`)).text();
    expect(metrics).toMatch(/^guidgate_notifications_pending 0$/m);
    expect(metrics).toMatch(/^guidgate_notifications_total\{result="given_up"\} 0$/m);
    expect(Number(/^guidgate_notifications_total\{result="delivered"\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2);
  }, 120_000);

  it('a transfer FAILED at the attempt cap is a transfer.dead_letter, with a null response', async () => {
    const receiver = cleanup.use(await startReceiver());
    const db = join(tmp(), 'ledger.db');
    // Nothing listens at the account URL: every send is refused, FAILED at once; one attempt is the cap.
    const a = await relay(db, 'http://127.0.0.1:9', receiver.url, ['--max-attempts', '1', '--settle-every', '0']);
    expect((await post(a.url, 'N-DEAD-1')).code).toBe('E902');
    const [n] = await waitFor(() => (receiver.received.length > 0 ? receiver.received : null), { timeoutMs: 15_000, what: 'the dead letter\'s notification' });
    expect(signatureValid(secretFile().secret, n!)).toBe(true);
    expect(bodyOf(n!)).toMatchObject({ type: 'transfer.dead_letter', guid: 'N-DEAD-1', status: 'FAILED', code: 'E902', attempts: 1, response: null });
  }, 60_000);

  it('a receiver down while the relay is SIGKILLed after the settling event: delivered after the restart, same webhook-id; a 500 after it: delivered on the third try, the retries 5 s then 10 s apart', async () => {
    const sim = cleanup.use(await startSimulator({ port: 0, faults: { byGuidPrefix: { 'N-RESET': 'reset' } } }));
    // Answers 500 to the first POST, then 204 (the retry schedule itself: notifications.unit's retryDelayMs).
    const receiver = cleanup.use(await startReceiver((_r, n) => ({ status: n < 1 ? 500 : 204 })));
    await receiver.stop();
    const db = join(tmp(), 'ledger.db');
    const a = await relay(db, sim.url, receiver.url, ['--settle-every', '0']);
    expect((await post(a.url, 'N-RESET-crash')).code).toBe('E901');
    const resolved = await cli(['resolve', '--db', db, '--account-url', sim.url, '--min-age', '1ms']);
    expect(resolved.code, resolved.stderr).toBe(0);
    const store = cleanup.use(openLedger(db));
    // The relay tried once (refused) and is killed before any delivery.
    await waitFor(async () => (await orThrow(store.notificationAttempts('N-RESET-crash'))).length > 0, { timeoutMs: 15_000, what: 'a refused attempt' });
    await sigkill(a);
    await receiver.start();
    const started = Date.now();
    await relay(db, sim.url, receiver.url, ['--settle-every', '0']);
    await waitFor(() => receiver.received.some((r) => r.answered === 204), { timeoutMs: 60_000, intervalMs: 100, what: 'delivered on the third try' });
    console.log(`delivered ${Date.now() - started} ms after the restart, after ${receiver.received.length} POSTs`);
    expect(receiver.received.map((r) => r.answered)).toEqual([500, 204]);
    expect(new Set(receiver.received.map((r) => r.id)).size).toBe(1);
    expect(receiver.received[0]!.id).toMatch(/^N-RESET-crash:\d+$/);
    // The receiver has answered; the relay records the delivery a moment later.
    const attempts = await waitFor(async () => {
      const recorded = await orThrow(store.notificationAttempts('N-RESET-crash'));
      return recorded.some((x) => x.result === 'delivered') ? recorded : null;
    }, { what: 'the delivery recorded' });
    expect(attempts.map((x) => x.result)).toEqual(['failed', 'failed', 'delivered']);
    // Each retry at least its delay after the attempt before it (5 s, then 10 s), a restart in between.
    const at = attempts.map((x) => x.at);
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(5_000);
    expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(10_000);
    const history = await cli(['history', 'N-RESET-crash', '--db', db]);
    expect(history.stdout).toMatch(/notification .*delivered/);
  }, 120_000);

  it('a receiver holding every connection or redirecting costs the channel replies nothing; two relays on one ledger never deliver one notification at once', async () => {
    const sim = cleanup.use(await startSimulator({ port: 0, faults: { byGuidPrefix: { 'N-RESET': 'reset' } } }));
    let hold = true;
    const receiver = cleanup.use(await startReceiver((r, n) => (hold ? { hold: true } : n % 3 === 0 ? { redirect: 'http://127.0.0.1:9/elsewhere' } : { status: 200 })));
    const db = join(tmp(), 'ledger.db');
    const args = ['--settle-every', '100ms', '--min-age', '200ms', '--notify-timeout', '2s'];
    const [a, b] = await Promise.all([relay(db, sim.url, receiver.url, args), relay(db, sim.url, receiver.url, args)]);
    /** 100 ordinary transfers, alternating relays: their reply times, sorted. */
    const replyTimes = async (prefix: string): Promise<number[]> => {
      const latencies: number[] = [];
      for (let i = 0; i < 100; i++) {
        const t0 = performance.now();
        expect((await post(i % 2 === 0 ? a.url : b.url, `${prefix}-${i}`)).code).toBe('0000');
        latencies.push(performance.now() - t0);
      }
      return latencies.sort((x, y) => x - y);
    };
    const before = await replyTimes('N-OK-before');
    const guids = Array.from({ length: 12 }, (_, i) => `N-RESET-many-${i}`);
    for (const guid of guids) expect((await post(a.url, guid)).code).toBe('E901');
    // While the receiver holds every connection: ordinary transfers are answered as fast as ever.
    await waitFor(() => receiver.received.length >= 2, { timeoutMs: 20_000, what: 'held deliveries' });
    const held = await replyTimes('N-OK-held');
    const shown = (l: number[]) => `p50 ${l[50]!.toFixed(1)} ms, p99 ${l[98]!.toFixed(1)} ms`;
    console.log(`channel replies: without notifications ${shown(before)}; while the receiver holds every connection ${shown(held)}`);
    expect(held[98]!).toBeLessThan(Math.max(1000, before[98]! * 3));
    hold = false;
    await waitFor(() => guids.every((g) => receiver.received.some((r) => bodyOf(r).guid === g && r.answered === 200)), { timeoutMs: 90_000, intervalMs: 100, what: 'every notification delivered' });
    expect(receiver.maxConcurrentPerId()).toBe(1);
    for (const g of guids) expect(receiver.received.filter((r) => bodyOf(r).guid === g && r.answered === 200), g).toHaveLength(1);
  }, 150_000);

  describe.skipIf(!pgAvailable)('on PostgreSQL', () => {
    const dbs = useTestDatabases();

    it('three relays on one ledger: every notification delivered, none by two relays at once; a 0000 in the reply: none', async () => {
      const sim = cleanup.use(await startSimulator({ port: 0, faults: { byGuidPrefix: { 'N-RESET': 'reset' } } }));
      const receiver = cleanup.use(await startReceiver());
      const { secret } = secretFile();
      const db = dbs.url();
      const args = ['--settle-every', '100ms', '--min-age', '200ms'];
      const relays = [await relay(db, sim.url, receiver.url, args)];
      relays.push(...(await Promise.all([relay(db, sim.url, receiver.url, args), relay(db, sim.url, receiver.url, args)])));
      const guids = Array.from({ length: 24 }, (_, i) => `N-RESET-pg-${i}`);
      await Promise.all(guids.map(async (g, i) => expect((await post(relays[i % 3]!.url, g)).code).toBe('E901')));
      for (let i = 0; i < 6; i++) expect((await post(relays[i % 3]!.url, `N-OK-pg-${i}`)).code).toBe('0000');
      await waitFor(() => guids.every((g) => forGuid(receiver.received, g).length > 0), { timeoutMs: 60_000, intervalMs: 50, what: 'every notification delivered' });
      expect(receiver.maxConcurrentPerId()).toBe(1);
      for (const g of guids) {
        const got = forGuid(receiver.received, g);
        expect(got, g).toHaveLength(1);
        expect(signatureValid(secret, got[0]!)).toBe(true);
        expect(bodyOf(got[0]!)).toMatchObject({ type: 'transfer.settled', status: 'DONE', code: '0000' });
        expect(bodyOf(got[0]!).response).toBe((await post(relays[0]!.url, g)).text);
      }
      expect(receiver.received.filter((r) => bodyOf(r).guid.startsWith('N-OK-'))).toHaveLength(0);
      const listed = await cli(['notifications', '--db', db, '--json']);
      expect(listed.code, listed.stderr).toBe(0);
      await waitFor(async () => {
        const views = JSON.parse((await cli(['notifications', '--db', db, '--pending', '--json'])).stdout) as unknown[];
        return views.length === 0;
      }, { timeoutMs: 20_000, intervalMs: 200, what: 'none pending' });
    }, 150_000);
  });

  it('an https:// receiver is verified as the account system is: a certificate of another CA is refused (recorded, tried again), the CA given by --notify-ca delivers', async () => {
    const pki = makePki(tmp());
    const got: string[] = [];
    const server = createHttpsServer({ cert: pki.serverCert, key: pki.serverKey }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        got.push(String(req.headers['webhook-id']));
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.add(() => new Promise((r) => server.close(r)));
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    const sim = cleanup.use(await startSimulator({ port: 0, faults: { byGuidPrefix: { 'N-RESET': 'reset' } } }));
    const db = join(tmp(), 'ledger.db');
    const wrong = await relay(db, sim.url, url, ['--notify-ca', pki.paths.otherCaCert, '--settle-every', '100ms', '--min-age', '200ms']);
    expect((await post(wrong.url, 'N-RESET-tls')).code).toBe('E901');
    const store = cleanup.use(openLedger(db));
    const [first] = await waitFor(async () => {
      const a = await orThrow(store.notificationAttempts('N-RESET-tls'));
      return a.length > 0 ? a : null;
    }, { timeoutMs: 20_000, what: 'a refused attempt' });
    expect(first).toMatchObject({ result: 'failed', httpStatus: null });
    expect(first!.detail).toMatch(/CERT|SIGNATURE|VERIFY|SELF_SIGNED|ISSUER/i);
    expect(got).toEqual([]);
    await sigkill(wrong);
    await relay(db, sim.url, url, ['--notify-ca', pki.paths.caCert, '--settle-every', '0']);
    await waitFor(() => got.length > 0, { timeoutMs: 30_000, what: 'the delivery over https' });
    expect(got[0]).toMatch(/^N-RESET-tls:\d+$/);
  }, 90_000);

  it('refuses to start with a secret file others can read, or shorter than 24 bytes', async () => {
    const db = join(tmp(), 'ledger.db');
    const loose = join(tmp(), 'loose.secret');
    writeFileSync(loose, SECRET);
    chmodSync(loose, 0o644);
    const short = join(tmp(), 'short.secret');
    writeFileSync(short, 'too-short\n');
    chmodSync(short, 0o600);
    for (const [file, message] of [[loose, /--notify-secret-file: .* is readable by others/], [short, /--notify-secret-file: .* holds 9 bytes; a secret needs at least 24/]] as const) {
      const r = await cli(['serve', '--port', '0', '--db', db, '--notify-url', 'http://127.0.0.1:9/', '--notify-secret-file', file]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toContain(SECRET);
    }
    const none = await cli(['serve', '--port', '0', '--db', db, '--notify-url', 'http://127.0.0.1:9/']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/--notify-url needs --notify-secret-file/);
  }, 60_000);
});
