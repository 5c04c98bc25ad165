import net from 'node:net';
import { join } from 'node:path';
import tls from 'node:tls';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { makePki } from '../support/certs.js';
import { makeKeys, startHarness, transfer, type Harness } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { waitFor } from '../support/waitFor.js';

/** A client connection that sends `head` (a request without a body, keep-alive) and keeps the connection open. */
interface RawClient {
  readonly socket: net.Socket;
  /** Resolves once the first answer arrived in full (its status), or with 0 once the server closed first. */
  readonly answered: Promise<number>;
  /** Resolves when the connection is closed (by the server, or by the test). */
  readonly closed: Promise<void>;
  isClosed(): boolean;
  /** What the server sent so far. */
  received(): string;
}

/** `ca`: the URL is https and its certificate chains to this CA. */
function rawClient(url: string, head: string, localAddress = '127.0.0.1', ca?: string): RawClient {
  const { hostname, port } = new URL(url);
  const tcp = net.connect({ host: hostname, port: Number(port), localAddress });
  const socket = ca === undefined ? tcp : tls.connect({ socket: tcp, host: hostname, ca });
  socket.on('error', () => {});
  let text = '';
  let closed = false;
  const closedP = new Promise<void>((r) => socket.once('close', () => ((closed = true), r())));
  const answered = new Promise<number>((resolve) => {
    socket.on('data', (d: Buffer) => {
      text += d.toString();
      const end = text.indexOf('\r\n\r\n');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(text)?.[1] ?? -1);
      if (end >= 0 && length >= 0 && Buffer.byteLength(text) >= end + 4 + length) resolve(Number(text.slice(9, 12)));
    });
    void closedP.then(() => resolve(0));
  });
  socket.write(head);
  return { socket, answered, closed: closedP, isClosed: () => closed, received: () => text };
}

const HEALTH = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
const post = (body: string, headers = '') =>
  `POST /v1/transfers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${headers}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

describe('idle keep-alive connections cannot lock channels out (real sockets; loopback addresses as distinct clients)', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  let h: Harness | undefined;
  const harness = async (...args: Parameters<typeof startHarness>): Promise<Harness> => (h = cleanup.use(await startHarness(...args)));
  const open = (url: string, head: string, from?: string, ca?: string) => {
    const c = rawClient(url, head, from, ca);
    cleanup.add(() => c.socket.destroy());
    return c;
  };
  /** `n` connections from `from`, each sending `head` once and then staying idle; each has its answer or was closed. */
  const idleCrowd = async (url: string, n: number, from: string, head = HEALTH): Promise<RawClient[]> => {
    const crowd: RawClient[] = [];
    for (let i = 0; i < n; i += 64) {
      const wave = Array.from({ length: Math.min(64, n - i) }, () => open(url, head, from));
      await Promise.all(wave.map((c) => c.answered));
      crowd.push(...wave);
    }
    return crowd;
  };
  /** A channel's transfer over a connection of its own from `from`. */
  const channelTransfer = async (url: string, from: string) => {
    const agent = cleanup.use(new Agent({ connect: { localAddress: from } }));
    const res = await request(`${url}/v1/transfers`, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json' }, body: JSON.stringify(transfer()) });
    return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
  };
  const closedTotal = async (reason: string) => {
    const text = await (await request(`${h!.relay.url}/metrics`, { dispatcher: cleanup.use(new Agent({ connect: { localAddress: '127.0.0.3' } })) })).body.text();
    return Number(new RegExp(`guidgate_connections_closed_total\\{reason="${reason}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
  };

  it('the attack of #24 (1,024 connections from one address, each one GET /healthz, then idle): a channel from another address still gets its transfer through', async () => {
    h = await harness(tmp());
    const crowd = await idleCrowd(h.relay.url, 1024, '127.0.0.1');
    const held = crowd.filter((c) => !c.isClosed()).length;
    expect(held).toBe(256);
    const r = await channelTransfer(h.relay.url, '127.0.0.2');
    expect([r.status, r.body['code']]).toEqual([200, '0000']);
    // Each connection past the address's cap took the slot of the address's own longest idle one.
    expect(await closedTotal('idle-for-new')).toBeGreaterThanOrEqual(1024 - 256);
  }, 60_000);

  it('the same attack from many addresses, each under its cap, fills every slot: a new channel connection takes the slot of the longest idle one', async () => {
    h = await harness(tmp());
    const crowds = await Promise.all(Array.from({ length: 8 }, (_, i) => idleCrowd(h!.relay.url, 128, `127.0.0.${10 + i}`)));
    expect(crowds.flat().filter((c) => !c.isClosed())).toHaveLength(1024);
    const r = await channelTransfer(h.relay.url, '127.0.0.2');
    expect([r.status, r.body['code']]).toEqual([200, '0000']);
    expect(crowds.flat().filter((c) => c.isClosed()).length).toBeGreaterThanOrEqual(1);
    expect(await closedTotal('idle-for-new')).toBeGreaterThanOrEqual(1);
  }, 60_000);

  /** A transfer whose call the simulator holds (it never answers): its connection is busy until the call timeout. */
  const held = (url: string, from?: string) => {
    const t = transfer({ guid: `hold-${Math.random().toString(36).slice(2)}` });
    return { client: open(url, post(JSON.stringify(t)), from), guid: String(t['guid']) };
  };
  const holding = { sim: { faults: { byGuidPrefix: { 'hold-': 'hold' as const } } } };

  it("over the cap, the longest idle connection that carried no channel's request goes first; a channel's idle connection stays; with every one busy the new one is closed unanswered", async () => {
    h = await harness(tmp(), { ...holding, relay: { maxConnections: 4, timeoutMs: 3_000 } });
    const url = h.relay.url;
    const channel = open(url, post(JSON.stringify(transfer())));
    expect(await channel.answered).toBe(200);
    const idle: RawClient[] = [];
    for (let i = 0; i < 3; i++) {
      idle.push(open(url, HEALTH));
      expect(await idle[i]!.answered).toBe(200);
    }
    const [h1, h2, h3] = idle;
    expect(await open(url, HEALTH).answered).toBe(200);
    await h1!.closed;
    expect([channel.isClosed(), h2!.isClosed(), h3!.isClosed()]).toEqual([false, false, false]);
    expect(await open(url, HEALTH).answered).toBe(200);
    await h2!.closed;
    expect(channel.isClosed()).toBe(false);

    // Four connections each waiting for their call: nothing idle to give up its slot (the idle ones go for them).
    const busy = Array.from({ length: 4 }, () => held(url));
    await waitFor(() => busy.every((b) => h!.sim.guidStats(b.guid).calls === 1), { what: 'four calls in flight' });
    const refused = open(url, HEALTH);
    expect(await refused.answered).toBe(0);
    expect(busy.some((b) => b.client.isClosed())).toBe(false);
  }, 60_000);

  it('--max-connections-per-address: a new connection from a full address takes the slot of its own idle one, and is closed when they are all busy; another address is served', async () => {
    h = await harness(tmp(), { ...holding, relay: { maxConnectionsPerAddress: 2, timeoutMs: 3_000 } });
    const url = h.relay.url;
    const a = open(url, HEALTH, '127.0.0.1');
    expect(await a.answered).toBe(200);
    const b = open(url, HEALTH, '127.0.0.1');
    expect(await b.answered).toBe(200);
    expect(await open(url, HEALTH, '127.0.0.1').answered).toBe(200);
    await a.closed;
    expect(b.isClosed()).toBe(false);

    const busy = [held(url, '127.0.0.4'), held(url, '127.0.0.4')];
    await waitFor(() => busy.every((c) => h!.sim.guidStats(c.guid).calls === 1), { what: 'two calls in flight' });
    expect(await open(url, HEALTH, '127.0.0.4').answered).toBe(0);
    expect(busy.some((c) => c.client.isClosed())).toBe(false);
    expect(await open(url, HEALTH, '127.0.0.5').answered).toBe(200);
  }, 60_000);

  it("under TLS the same: an idle connection gives its slot to a new one, a channel's last", async () => {
    const pki = makePki(tmp());
    h = await harness(tmp(), { relay: { maxConnections: 2, tls: { cert: Buffer.from(pki.serverCert), key: Buffer.from(pki.serverKey) } } });
    const url = h.relay.url;
    expect(url).toMatch(/^https:/);
    const channel = open(url, post(JSON.stringify(transfer())), undefined, pki.caCert);
    expect(await channel.answered).toBe(200);
    expect(channel.received()).toMatch(/\r\nkeep-alive: timeout=72\r\n/i);
    const idle = open(url, HEALTH, undefined, pki.caCert);
    expect(await idle.answered).toBe(200);
    expect(await open(url, HEALTH, undefined, pki.caCert).answered).toBe(200);
    await idle.closed;
    expect(channel.isClosed()).toBe(false);
  }, 60_000);

  it("keep-alive: a connection that carried only /healthz, /metrics or a refused request is closed once idle for the short keep-alive; one that carried a channel's transfer stays open", async () => {
    const dir = tmp();
    const keys = makeKeys(join(dir, 'keys'), { pay: ['transfer'], reader: ['read'] });
    h = await harness(dir, { relay: { keys: keys.ring } });
    const url = h.relay.url;
    const channel = open(url, post(JSON.stringify(transfer()), `Authorization: Bearer ${keys.tokens['pay']!}\r\n`));
    expect(await channel.answered).toBe(200);
    expect(channel.received()).toMatch(/\r\nkeep-alive: timeout=72\r\n/i);
    // Idle from after the channel's: with the same keep-alive they would be closed after it.
    const others = [
      open(url, HEALTH),
      open(url, `GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keys.tokens['reader']!}\r\n\r\n`),
      open(url, post(JSON.stringify(transfer()))), // no token: E401
    ];
    expect(await Promise.all(others.map((c) => c.answered))).toEqual([200, 200, 401]);
    for (const c of others) expect(c.received()).toMatch(/\r\nkeep-alive: timeout=5\r\n/i);
    // Closed by the server (the test closes nothing), while the channel's connection, idle longer, stays open.
    await Promise.all(others.map((c) => c.closed));
    expect(channel.isClosed()).toBe(false);
  }, 60_000);
});
