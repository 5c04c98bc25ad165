import net from 'node:net';
import { describe, it, expect } from 'vitest';
import { startHarness, transfer, ledgerRowCount, type Harness } from '../support/relayHarness.js';
import { parseRawReply, rawExchange } from '../support/rawHttp.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';

/**
 * A client that sends the headers of a POST and 5 bytes of its body, then nothing. `connected` resolves once the
 * connection is made (the server accepts connections in that order); `done` with what came back once it closed.
 */
function slowBodyClient(url: string): { connected: Promise<void>; done: Promise<{ text: string }>; socket: net.Socket } {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  const connected = new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write('POST /v1/transfers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"gui');
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString()));
  const done = new Promise<{ text: string }>((resolve) => {
    socket.on('close', () => resolve({ text }));
    socket.on('error', () => {});
  });
  return { connected, done, socket };
}

describe('time limits (real sockets): body timeout, connection cap, bounded shutdown', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const harness = async (...args: Parameters<typeof startHarness>): Promise<Harness> => cleanup.use(await startHarness(...args));
  const slow = (url: string) => {
    const c = slowBodyClient(url);
    cleanup.add(() => c.socket.destroy());
    return c;
  };

  it('slow-body clients get 408/E400 at the body timeout and are cut off, while normal requests keep being served', async () => {
    const h = await harness(tmp(), { relay: { bodyTimeoutMs: 1_000 } });
    const slowOnes = Array.from({ length: 8 }, () => slow(h.relay.url));
    await Promise.all(slowOnes.map((c) => c.connected));
    let cut = 0;
    for (const c of slowOnes) void c.done.then(() => cut++);
    const served: string[] = [];
    for (let i = 0; i < 5; i++) served.push(String((await h.post(JSON.stringify(transfer()))).json()['code']));
    // Served while every slow client was still waiting for its body timeout.
    expect([served, cut]).toEqual([['0000', '0000', '0000', '0000', '0000'], 0]);
    for (const { text } of await Promise.all(slowOnes.map((c) => c.done))) {
      const reply = parseRawReply(text);
      expect(reply.status).toBe(408);
      expect(JSON.parse(reply.body)).toMatchObject({ code: 'E400', field: 'body' });
    }
    expect(ledgerRowCount(h.db)).toBe(5);
    expect(h.sim.stats().totalCalls).toBe(5);
  });

  it('at most maxConnections connections are held: one more is closed unanswered, and is served once room is free', async () => {
    const h = await harness(tmp(), { relay: { maxConnections: 3, bodyTimeoutMs: 1_500 } });
    const held = [slow(h.relay.url), slow(h.relay.url), slow(h.relay.url)];
    // Connected before the next one: the server takes them in that order.
    await Promise.all(held.map((c) => c.connected));
    const refused = await rawExchange(h.relay.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 1_000);
    expect(refused.closedByServer).toBe(true);
    expect(refused.reply.status).toBe(0);
    await Promise.all(held.map((c) => c.done));
    const later = await rawExchange(h.relay.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect([later.reply.status, later.reply.body]).toEqual([200, '{"status":"ok"}']);
  });

  it('close() ends by itself (within the call timeout plus 5 s) whatever slow-body and keep-alive clients do', async () => {
    // A body timeout far beyond the test's own: only close() can end these connections.
    const h = await harness(tmp(), { relay: { timeoutMs: 1_000, bodyTimeoutMs: 3_600_000 } });
    const slowOnes = Array.from({ length: 4 }, () => slow(h.relay.url));
    await Promise.all(slowOnes.map((c) => c.connected));
    await h.post(JSON.stringify(transfer())); // leaves a keep-alive connection open
    await h.relay.close();
    // The slow ones are cut, not left hanging until their body timeout.
    await Promise.all(slowOnes.map((c) => c.done));
  }, 30_000);
});
