import net from 'node:net';
import { describe, it, expect, afterEach } from 'vitest';
import { startHarness, transfer, ledgerRowCount, type Harness } from '../support/relayHarness.js';
import { parseRawReply, rawExchange } from '../support/rawHttp.js';
import { useTempDir } from '../support/tmp.js';

/** A client that sends the headers of a POST and 5 bytes of its body, then nothing. */
function slowBodyClient(url: string): { done: Promise<{ text: string; ms: number }>; socket: net.Socket } {
  const { hostname, port } = new URL(url);
  const started = performance.now();
  const socket = net.connect(Number(port), hostname);
  socket.write('POST /v1/transfers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"gui');
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString()));
  const done = new Promise<{ text: string; ms: number }>((resolve) => {
    socket.on('close', () => resolve({ text, ms: performance.now() - started }));
    socket.on('error', () => {});
  });
  return { done, socket };
}

describe('time limits (real sockets): body timeout, connection cap, bounded shutdown', () => {
  const tmp = useTempDir();
  let h: Harness | undefined;
  const sockets: net.Socket[] = [];
  afterEach(async () => {
    while (sockets.length) sockets.pop()!.destroy();
    await h?.close();
    h = undefined;
  });
  const slow = (url: string) => {
    const c = slowBodyClient(url);
    sockets.push(c.socket);
    return c.done;
  };

  it('slow-body clients get 408/E400 within the body timeout and are cut off, while normal requests keep being served', async () => {
    h = await startHarness(tmp(), { relay: { bodyTimeoutMs: 800 } });
    const slowOnes = Array.from({ length: 8 }, () => slow(h!.relay.url));
    const served: string[] = [];
    for (let i = 0; i < 5; i++) {
      served.push(String((await h.post(JSON.stringify(transfer()))).json()['code']));
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(served).toEqual(['0000', '0000', '0000', '0000', '0000']);
    for (const { text, ms } of await Promise.all(slowOnes)) {
      const reply = parseRawReply(text);
      expect(reply.status).toBe(408);
      expect(JSON.parse(reply.body)).toMatchObject({ code: 'E400', field: 'body' });
      expect(ms).toBeGreaterThanOrEqual(700);
      expect(ms).toBeLessThan(3_000);
    }
    expect(ledgerRowCount(h.db)).toBe(5);
    expect(h.sim.stats().totalCalls).toBe(5);
  });

  it('at most maxConnections connections are held: one more is closed unanswered, and is served once room is free', async () => {
    h = await startHarness(tmp(), { relay: { maxConnections: 3, bodyTimeoutMs: 1_500 } });
    const held = [slow(h.relay.url), slow(h.relay.url), slow(h.relay.url)];
    await new Promise((r) => setTimeout(r, 200));
    const refused = await rawExchange(h.relay.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 1_000);
    expect(refused.closedByServer).toBe(true);
    expect(refused.reply.status).toBe(0);
    await Promise.all(held);
    const later = await rawExchange(h.relay.url, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect([later.reply.status, later.reply.body]).toEqual([200, '{"status":"ok"}']);
  });

  it('close() ends within the call timeout plus 5 s whatever slow-body and keep-alive clients do', async () => {
    h = await startHarness(tmp(), { relay: { timeoutMs: 1_000, bodyTimeoutMs: 60_000 } });
    const slowOnes = Array.from({ length: 4 }, () => slow(h!.relay.url));
    await h.post(JSON.stringify(transfer())); // leaves a keep-alive connection open
    await new Promise((r) => setTimeout(r, 100));
    const started = performance.now();
    await h.relay.close();
    const ms = performance.now() - started;
    expect(ms).toBeLessThan(1_000 + 5_000);
    // The slow ones are cut, not left hanging until their 60 s body timeout.
    for (const { ms: held } of await Promise.all(slowOnes)) expect(held).toBeLessThan(1_000 + 5_000 + 1_000);
  });
});
