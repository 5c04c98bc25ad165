import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { createAccountClient } from '../../src/account/accountClient.js';
import type { AccountClient, AccountClientOptions, CallOutcome } from '../../src/account/accountClient.js';
import { startSimulator } from '../../src/simulator/index.js';
import { freePort } from '../support/children.js';
import { useCleanup } from '../support/cleanup.js';
import { sleep, waitFor } from '../support/waitFor.js';
import { socketsTo } from '../support/tcpStates.js';
import { makePki } from '../support/certs.js';
import { useTempDir } from '../support/tmp.js';

// ---------------------------------------------------------------------------------------------------------------
// Helpers: real servers on 127.0.0.1, port 0, torn down after every test.

const cleanup = useCleanup();
const tmp = useTempDir();

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, received: Received) => void;

/** An HTTP server recording every request (with its full body) before handing it to `handler`. */
async function httpServer(handler: Handler): Promise<{ url: string; received: Received[]; server: http.Server }> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      received.push(r);
      handler(req, res, r);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.add(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as net.AddressInfo;
  return { url: `http://127.0.0.1:${port}`, received, server };
}

/** A client closed after the test; `closed()` closes it earlier, waiting for every request it still has in flight. */
function client(opts: Partial<AccountClientOptions> & { baseUrl: string }): AccountClient & { closed(): Promise<void> } {
  const c = createAccountClient({ timeoutMs: 400, ...opts });
  return Object.assign(c, { closed: cleanup.add(() => c.close()) });
}

/** One turn of the event loop: what undici's pool needs to see a client drained, so the next request reuses its socket. */
const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

const answer = (res: http.ServerResponse, status: number, body: string | Buffer): void => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(body);
};

/** Count identical bodies: the account system must never see one twice. */
function copies(received: Received[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of received) m.set(r.body.toString('latin1'), (m.get(r.body.toString('latin1')) ?? 0) + 1);
  return m;
}

/**
 * A child process listening with backlog 1 that prints every connection it accepts, every byte it receives and every
 * close. `then`: its code run once it listens (after printing its port). Once 4 filler connections are made while it
 * accepts nothing, the accept queue (backlog + 1 = 2 on Linux) is full and the kernel drops further SYNs, ours
 * included; each is retransmitted ~1 s, 3 s, 7 s after the connect started.
 */
async function recordingListener(then: string, ready: (out: () => string, child: ChildProcess) => Promise<void>) {
  // Writes to a pipe are synchronous: a line is out before the event loop stops.
  const code = `const s=require('net').createServer(c=>{process.stdout.write('conn\\n');c.on('data',d=>process.stdout.write('data '+JSON.stringify(d.toString('latin1'))+'\\n'));c.on('close',()=>process.stdout.write('closed\\n'));c.on('error',()=>{})});s.listen({port:0,host:'127.0.0.1',backlog:1},()=>{process.stdout.write('port '+s.address().port+'\\n');${then}})`;
  const child: ChildProcess = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  cleanup.add(() => {
    child.kill('SIGKILL');
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString('latin1')));
  await waitFor(() => /port \d+\n/.test(out), { what: 'the listener listening' });
  await ready(() => out, child);
  const port = Number(/port (\d+)\n/.exec(out)?.[1]);
  let connected = 0;
  for (let i = 0; i < 4; i++) {
    const sock = net.connect({ port, host: '127.0.0.1' }, () => connected++);
    sock.on('error', () => undefined);
    cleanup.add(() => {
      sock.destroy();
    });
  }
  await waitFor(() => connected >= 2, { what: 'the accept queue full' });
  const lines = () => out.split('\n');
  return {
    port,
    child,
    accepted: () => lines().filter((l) => l === 'conn').length,
    closed: () => lines().filter((l) => l === 'closed').length,
    data: () => lines().filter((l) => l.startsWith('data ')).join('\n'),
  };
}

/** A listener whose event loop is blocked (for `blockMs`, default forever), so it accepts nothing: SYNs dropped. */
function blackHole(blockMs?: number) {
  const block = `setTimeout(()=>{process.stdout.write('blocked\\n');Atomics.wait(new Int32Array(new SharedArrayBuffer(4)),0,0,${blockMs ?? 'undefined'})},20)`;
  return recordingListener(block, (out) => waitFor(() => out().includes('blocked\n'), { what: 'the black hole\'s event loop blocked' }).then(() => undefined));
}

/** A listener stopped (SIGSTOP) so it accepts nothing, SYNs dropped, until `resume()` (SIGCONT). */
async function stoppedListener() {
  const l = await recordingListener('', async (_out, child) => {
    child.kill('SIGSTOP');
  });
  return { ...l, resume: () => l.child.kill('SIGCONT') };
}

/**
 * Holds this process's event loop inside a timer callback (a VM pause or a long GC, as the process sees it) until
 * `until()` is true, after running `first` in it: when the loop comes back it polls I/O (and runs immediates)
 * before it runs the timers that fell due meanwhile.
 */
function stallInTimer(until: () => boolean, first?: () => void): Promise<void> {
  return new Promise((resolve) => {
    setTimeout(() => {
      first?.();
      const pause = new Int32Array(new SharedArrayBuffer(4));
      const giveUp = performance.now() + 20_000;
      while (!until() && performance.now() < giveUp) Atomics.wait(pause, 0, 0, 2);
      resolve();
    }, 0);
  });
}

const REQUEST_GUID = 'g-1';
const REQUEST = '{ "guid":"g-1",\t"from":"A-1" ,"to":"B-2","amount":  100,"memo":"转账 ✓ \\u00e9 é","x":[1.50, 1e2 ] }';

// ---------------------------------------------------------------------------------------------------------------

describe('transfer: definite answers', () => {
  it.each([
    ['0000', '{ "code" :"0000",  "message":"转账成功 ✓",\n "balance": 1.50, "fee":1e2 }'],
    ['B201', '{"code":"B201","message":"余额不足","extra":{"a" : [ ]}}'],
    ['E500', '\t{"code": "E500" , "message":"core down \\u2603 ☃"}  \n'],
  ])('%s → definite with the body byte for byte', async (code, body) => {
    const s = await httpServer((_req, res) => answer(res, 200, Buffer.from(body, 'utf8')));
    const out = await client({ baseUrl: s.url }).transfer(REQUEST, REQUEST_GUID);
    expect(out).toMatchObject({ kind: 'definite', code, status: 200 });
    if (out.kind !== 'definite') throw new Error('unreachable');
    expect(out.body).toBe(body);
    expect(Buffer.from(out.body, 'utf8').equals(Buffer.from(body, 'utf8'))).toBe(true);
    expect(out.latencyMs).toBeGreaterThan(0);
  });

  it('sends the request body byte for byte, as POST /transfer with content-type application/json', async () => {
    const s = await httpServer((_req, res) => answer(res, 200, '{"code":"0000"}'));
    const c = client({ baseUrl: s.url });
    expect((await c.transfer(REQUEST, REQUEST_GUID)).kind).toBe('definite');
    const raw = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xe2, 0x82, 0xac, 0x22, 0x20, 0x7d]); // {"a":"€" }
    expect((await c.transfer(raw, REQUEST_GUID)).kind).toBe('definite');
    expect(s.received).toHaveLength(2);
    const [first, second] = s.received;
    expect(first?.method).toBe('POST');
    expect(first?.url).toBe('/transfer');
    expect(first?.headers['content-type']).toBe('application/json');
    expect(first?.body.equals(Buffer.from(REQUEST, 'utf8'))).toBe(true);
    expect(second?.body.equals(raw)).toBe(true);
  });

  it('keeps a path prefix of the base URL', async () => {
    const s = await httpServer((_req, res) => answer(res, 200, '{"code":"0000"}'));
    expect((await client({ baseUrl: `${s.url}/core/v1/` }).transfer('{}', REQUEST_GUID)).kind).toBe('definite');
    expect(s.received[0]?.url).toBe('/core/v1/transfer');
  });
});

describe('transfer: non-definite answers → unknown/non-definite', () => {
  it.each<[string, number, Buffer, string]>([
    ['502 garbage', 502, Buffer.from('<html>Bad Gateway</html>'), 'HTTP 502'],
    ['200 with code E400', 200, Buffer.from('{"code":"E400","message":"bad"}'), 'code E400'],
    ['200 with invalid UTF-8', 200, Buffer.from([0x7b, 0x22, 0x63, 0x6f, 0x64, 0x65, 0x22, 0x3a, 0x22, 0x30, 0x30, 0x30, 0x30, 0x22, 0x2c, 0x22, 0x6d, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]), 'UTF-8'],
    ['200 not JSON', 200, Buffer.from('code=0000'), 'not JSON'],
    ['200 JSON array', 200, Buffer.from('[{"code":"0000"}]'), 'code'],
    ['200 without code', 200, Buffer.from('{"status":"ok"}'), 'without a code'],
    ['200 numeric code', 200, Buffer.from('{"code":0}'), 'code 0'],
    ['200 B2 with 2 digits', 200, Buffer.from('{"code":"B20"}'), 'code B20'],
    ['200 with a BOM', 200, Buffer.from('\uFEFF{"code":"0000"}', 'utf8'), 'not JSON'],
    ['201 with definite code', 201, Buffer.from('{"code":"0000"}'), 'HTTP 201'],
    // Contract v2 §3: a parser keeping the first `code` and one keeping the last would disagree.
    ['200 with code twice', 200, Buffer.from('{"code":"B201","code":"0000"}'), 'more than once'],
    ['200 with code twice, both definite and equal', 200, Buffer.from('{"code":"0000","m":1,"code":"0000"}'), 'more than once'],
    ['200 with code twice, one escaped', 200, Buffer.from('{"code":"0000","c\\u006fde":"E500"}'), 'more than once'],
  ])('%s', async (_n, status, body, detail) => {
    const s = await httpServer((_req, res) => answer(res, status, body));
    const out = await client({ baseUrl: s.url }).transfer(REQUEST, REQUEST_GUID);
    expect(out).toMatchObject({ kind: 'unknown', reason: 'non-definite' });
    if (out.kind !== 'unknown') throw new Error('unreachable');
    expect(out.detail).toContain(detail);
    expect(s.received).toHaveLength(1);
  });
});

describe('transfer: an answer about another GUID → unknown/non-definite', () => {
  it.each<[string, string, string]>([
    ['another GUID', '{"guid":"SOMEONE-ELSE","code":"0000","message":"transfer done"}', 'another GUID (SOMEONE-ELSE)'],
    ['guid twice', '{"guid":"g-1","code":"0000","guid":"SOMEONE-ELSE"}', 'guid given more than once'],
    ['guid not a string', '{"guid":1,"code":"0000"}', 'not a string'],
  ])('%s', async (_n, body, detail) => {
    const s = await httpServer((_req, res) => answer(res, 200, body));
    const out = await client({ baseUrl: s.url }).transfer(REQUEST, REQUEST_GUID);
    expect(out).toMatchObject({ kind: 'unknown', reason: 'non-definite', detail: expect.stringContaining(detail) });
    expect(s.received).toHaveLength(1);
  });

  it('an answer naming the GUID asked about is definite, byte for byte', async () => {
    const body = '{"guid":"g-1","code":"0000","message":"transfer done"}';
    const s = await httpServer((_req, res) => answer(res, 200, body));
    expect(await client({ baseUrl: s.url }).transfer(REQUEST, REQUEST_GUID)).toMatchObject({ kind: 'definite', code: '0000', body });
  });
});

describe('transfer and inquire against the bundled simulator (it names the GUID in every answer)', () => {
  it('POST → definite, inquiry → processed with the same bytes', async () => {
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const c = client({ baseUrl: sim.url, timeoutMs: 2000 });
    const body = JSON.stringify({ guid: 'sim-1', from: 'ACC-A', to: 'ACC-B', amount: 250 });
    const out = await c.transfer(body, 'sim-1');
    expect(out).toMatchObject({ kind: 'definite', code: '0000' });
    if (out.kind !== 'definite') throw new Error('unreachable');
    expect(JSON.parse(out.body)).toMatchObject({ guid: 'sim-1' });
    expect(await c.inquire('sim-1')).toEqual({ kind: 'processed', code: '0000', body: out.body });
    expect(await c.inquire('sim-2')).toEqual({ kind: 'absent' });
  });
});

describe('transfer: failures', () => {
  it('connection refused → failed/refused (nothing listens, so no byte reached anyone)', async () => {
    const port = await freePort();
    const out = await client({ baseUrl: `http://127.0.0.1:${port}` }).transfer(REQUEST, REQUEST_GUID);
    expect(out).toMatchObject({ kind: 'failed', reason: 'refused' });
  });

  describe('connect timeout (a listener whose accept queue is full: SYNs are dropped)', () => {
    it('undici connect timeout → failed/connect-timeout', async () => {
      const hole = await blackHole();
      // undici's connect timer has ~0.5 s granularity (its "fast timers"), so 200 ms fires after 200–1000 ms.
      const out = await client({ baseUrl: `http://127.0.0.1:${hole.port}`, timeoutMs: 3000, connectTimeoutMs: 200 }).transfer(REQUEST, REQUEST_GUID);
      expect(out).toMatchObject({ kind: 'failed', reason: 'connect-timeout' });
      if (out.kind !== 'failed') throw new Error('unreachable');
      expect(out.detail).toContain('UND_ERR_CONNECT_TIMEOUT');
      expect(out.latencyMs).toBeGreaterThanOrEqual(180);
    });

    it('overall deadline while still connecting → failed/connect-timeout, and the request is never written later', async () => {
      // The listener stops ignoring us after 400 ms; our SYN is retransmitted ~1 s in and then the connect succeeds.
      const hole = await blackHole(400);
      const c = client({ baseUrl: `http://127.0.0.1:${hole.port}`, timeoutMs: 200, connectTimeoutMs: 3000 });
      const out = await c.transfer(REQUEST, REQUEST_GUID);
      expect(out).toMatchObject({ kind: 'failed', reason: 'connect-timeout' });
      if (out.kind !== 'failed') throw new Error('unreachable');
      expect(out.detail).toContain('not handed to a socket');
      // The late connection accepted (the fifth, 4 fillers + ours; or the one closed, as no filler is closed before
      // the test ends), then ended by closing the client: all it ever carried has arrived, and none of it is the request.
      await waitFor(() => hole.accepted() >= 5 || hole.closed() >= 1, { intervalMs: 25, what: 'the late connection accepted' });
      await c.closed();
      await waitFor(() => hole.closed() >= 1, { what: 'the late connection closed' });
      expect(hole.data()).not.toContain('transfer');
    });
  });

  it('server reads the request and never answers → unknown/timeout after ~timeoutMs', async () => {
    const s = await httpServer(() => undefined);
    const out = await client({ baseUrl: s.url, timeoutMs: 300 }).transfer(REQUEST, REQUEST_GUID);
    expect(out).toMatchObject({ kind: 'unknown', reason: 'timeout' });
    expect(out.latencyMs).toBeGreaterThanOrEqual(280);
    expect(s.received).toHaveLength(1);
  });

  it('server trickles the body forever → unknown/timeout at the overall deadline', async () => {
    const s = await httpServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"code":"0000"');
      const iv = setInterval(() => res.write(' '), 50); // each chunk well inside bodyTimeout
      res.on('close', () => clearInterval(iv));
      cleanup.add(() => clearInterval(iv));
    });
    const out = await client({ baseUrl: s.url, timeoutMs: 300 }).transfer(REQUEST, REQUEST_GUID);
    expect(out).toMatchObject({ kind: 'unknown', reason: 'timeout' });
    expect(out.latencyMs).toBeGreaterThanOrEqual(280);
  });

  it('server reads the request and destroys the socket → unknown/reset', async () => {
    const s = await httpServer((req) => req.socket.destroy());
    const out = await client({ baseUrl: s.url }).transfer(REQUEST, REQUEST_GUID);
    expect(out).toMatchObject({ kind: 'unknown', reason: 'reset' });
    expect(s.received).toHaveLength(1);
  });

  it('server answers headers then dies mid-body → unknown', async () => {
    const s = await httpServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"code":"0000"', () => req.socket.destroy());
    });
    const out = await client({ baseUrl: s.url }).transfer(REQUEST, REQUEST_GUID);
    expect(out.kind).toBe('unknown');
  });

  it('raw TCP: request read then RST (SO_LINGER 0) → unknown/reset', async () => {
    let bytes = 0;
    const server = net.createServer((sock) => {
      sock.on('data', (d: Buffer) => {
        bytes += d.length;
        if (d.includes('\r\n\r\n')) sock.resetAndDestroy();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.add(() => new Promise<void>((r) => server.close(() => r())));
    const { port } = server.address() as net.AddressInfo;
    const out = await client({ baseUrl: `http://127.0.0.1:${port}` }).transfer(REQUEST, REQUEST_GUID);
    expect(out).toMatchObject({ kind: 'unknown', reason: 'reset' });
    expect(bytes).toBeGreaterThan(0);
  });
});

describe('the deadline where the bytes leave: no request byte is written at or after it, whatever the timers did', () => {
  const TIMEOUT_MS = 300;
  /** Past the deadline of a call started at `t0`, with room, by the monotonic clock. */
  const pastDeadline = (t0: number) => performance.now() - t0 > TIMEOUT_MS + 100;

  it('a connect completed after the deadline while the loop was held inside a timer: no byte written, failed/connect-timeout; nor of a call queued behind it', async () => {
    const hole = await stoppedListener();
    const fillers = new Set(socketsTo('self', hole.port).map((t) => t.inode));
    // One connection: the second call waits in the pool for the first's socket, still connecting.
    const c = client({ baseUrl: `http://127.0.0.1:${hole.port}`, timeoutMs: TIMEOUT_MS, connectTimeoutMs: 10_000, connections: 1 });
    const t0 = performance.now();
    const calls = [c.transfer(REQUEST, REQUEST_GUID), c.transfer('{"guid":"g-2"}', 'g-2')];
    // Past the deadline (its timer held back with the loop) the listener accepts again; our SYN's retransmission
    // (~1 s) then completes the connect in the kernel, and the loop comes back to a connected socket.
    await stallInTimer(() => {
      if (!pastDeadline(t0)) return false;
      if (hole.child.signalCode === null) hole.resume();
      return socketsTo('self', hole.port).some((t) => !fillers.has(t.inode) && t.state === 'ESTABLISHED');
    });
    const [first, queued] = await Promise.all(calls);
    expect(first).toMatchObject({ kind: 'failed', reason: 'connect-timeout', detail: expect.stringContaining('no byte of it left') });
    expect(queued).toMatchObject({ kind: 'failed', reason: 'connect-timeout' });
    await waitFor(() => hole.closed() >= 1, { what: 'the late connection accepted, then closed' });
    await c.closed();
    expect(hole.data()).toBe('');
  });

  it('a kept-alive socket handed the request after the deadline: no byte written, failed/connect-timeout', async () => {
    const s = await httpServer((_req, res) => answer(res, 200, '{"code":"0000"}'));
    const c = client({ baseUrl: s.url, timeoutMs: TIMEOUT_MS });
    expect((await c.transfer('{"guid":"ka-1"}', 'ka-1')).kind).toBe('definite');
    await nextTurn();
    let call: Promise<CallOutcome> | undefined;
    let t0 = 0;
    // undici checks an idle socket for one turn (an immediate) before writing to it: the loop is held before that.
    await stallInTimer(() => pastDeadline(t0), () => {
      t0 = performance.now();
      call = c.transfer('{"guid":"ka-2"}', 'ka-2');
    });
    expect(await call).toMatchObject({ kind: 'failed', reason: 'connect-timeout', detail: expect.stringContaining('no byte of it left') });
    await c.closed();
    expect(s.received.map((r) => r.body.toString())).toEqual(['{"guid":"ka-1"}']);
  });

  it('a call queued in the pool behind another, its turn come after its deadline: no byte written, failed/connect-timeout', async () => {
    let t1 = 0;
    const requests: string[] = [];
    const server = net.createServer((sock) => {
      sock.on('data', (d: Buffer) => {
        requests.push(d.toString('latin1'));
        // The first answer is put on the wire, and then the loop is held past the queued call's deadline before
        // the client reads it: its turn then comes before its deadline's timer runs.
        setTimeout(() => {
          sock.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\nconnection: keep-alive\r\n\r\n{"code":"0000"}');
          const pause = new Int32Array(new SharedArrayBuffer(4));
          while (!pastDeadline(t1)) Atomics.wait(pause, 0, 0, 2);
        }, 50);
      });
      sock.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.add(() => new Promise<void>((r) => server.close(() => r())));
    const { port } = server.address() as net.AddressInfo;
    const c = client({ baseUrl: `http://127.0.0.1:${port}`, timeoutMs: 2000, connections: 1 });
    const first = c.transfer('{"guid":"q-1"}', 'q-1');
    await waitFor(() => requests.length === 1, { what: 'the first call written' });
    t1 = performance.now();
    const queued = await c.transfer('{"guid":"q-2"}', 'q-2', undefined, t1 + TIMEOUT_MS - 2000); // its deadline: t1 + 300 ms
    // undici hands a queued request to the freed socket one immediate after another, so here the timers (its
    // deadline's) run first; the check at the write catches it when they do not (seen with that timer disabled).
    expect(queued).toMatchObject({ kind: 'failed', reason: 'connect-timeout' });
    expect((await first).kind).toBe('definite');
    await c.closed();
    expect(requests.join('')).not.toContain('q-2');
  });

  it('a TLS handshake completed after the deadline while the loop was held: no byte of the request written', async () => {
    const pki = makePki(tmp());
    let requests = 0;
    const server = https.createServer({ cert: pki.serverCert, key: pki.serverKey }, (_req, res) => {
      requests++;
      answer(res, 200, '{"code":"0000"}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.add(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));
    // Between client and server, a relay that holds the server's first flight and hands it over inside a timer
    // callback that then holds the loop past the call's deadline: the handshake completes when the loop comes back.
    let t0 = 0;
    const relay = net.createServer((down) => {
      const up = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
      down.pipe(up);
      let held: Buffer[] | null = [];
      up.on('data', (d: Buffer) => {
        if (held === null) return void down.write(d);
        held.push(d);
        if (held.length > 1) return;
        setTimeout(() => {
          down.write(Buffer.concat(held ?? []));
          held = null;
          const pause = new Int32Array(new SharedArrayBuffer(4));
          while (!pastDeadline(t0)) Atomics.wait(pause, 0, 0, 2);
        }, 50);
      });
      for (const sock of [up, down]) sock.on('error', () => undefined);
      up.on('close', () => down.destroy());
      down.on('close', () => up.destroy());
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    cleanup.add(() => new Promise<void>((r) => relay.close(() => r())));
    const c = client({ baseUrl: `https://127.0.0.1:${(relay.address() as net.AddressInfo).port}`, timeoutMs: TIMEOUT_MS, ca: pki.caCert });
    t0 = performance.now();
    expect(await c.transfer(REQUEST, REQUEST_GUID)).toMatchObject({ kind: 'failed', reason: 'connect-timeout', detail: expect.stringContaining('no byte of it left') });
    await c.closed();
    expect(requests).toBe(0);
  });

  it('a request written before the deadline, the loop then held past it: unknown/timeout as before (it may have arrived), one copy', async () => {
    const s = await httpServer(() => undefined);
    const c = client({ baseUrl: s.url, timeoutMs: TIMEOUT_MS });
    const t0 = performance.now();
    const call = c.transfer(REQUEST, REQUEST_GUID);
    await waitFor(() => s.received.length === 1, { what: 'the request received' });
    await stallInTimer(() => pastDeadline(t0));
    expect(await call).toMatchObject({ kind: 'unknown', reason: 'timeout' });
    expect(s.received).toHaveLength(1);
  });

  it('latestStart: a call starting after it keeps the deadline of one starting then (an already passed one: nothing written)', async () => {
    const s = await httpServer((_req, res) => answer(res, 200, '{"code":"0000"}'));
    const c = client({ baseUrl: s.url, timeoutMs: TIMEOUT_MS });
    expect(await c.transfer('{"guid":"ls-1"}', 'ls-1', undefined, performance.now() - TIMEOUT_MS)).toMatchObject({ kind: 'failed', reason: 'connect-timeout' });
    expect((await c.transfer('{"guid":"ls-2"}', 'ls-2', undefined, performance.now() - TIMEOUT_MS / 2)).kind).toBe('definite');
    expect((await c.transfer('{"guid":"ls-3"}', 'ls-3', undefined, performance.now() + 60_000)).kind).toBe('definite');
    await c.closed();
    expect(s.received.map((r) => r.body.toString())).toEqual(['{"guid":"ls-2"}', '{"guid":"ls-3"}']);
  });
});

describe('never a second copy', () => {
  it('no retry: a server that resets every connection after reading gets exactly one request per call', async () => {
    const s = await httpServer((req) => req.socket.destroy());
    const c = client({ baseUrl: s.url });
    const bodies = Array.from({ length: 6 }, (_, i) => `{"guid":"nr-${i}","amount":${i + 1}}`);
    const sequential: CallOutcome[] = [];
    for (const [i, b] of bodies.slice(0, 3).entries()) sequential.push(await c.transfer(b, `nr-${i}`));
    const concurrent = await Promise.all(bodies.slice(3).map((b, i) => c.transfer(b, `nr-${i + 3}`)));
    for (const out of [...sequential, ...concurrent]) expect(out).toMatchObject({ kind: 'unknown', reason: 'reset' });
    await c.closed(); // waits for any request still in flight: a (wrong) automatic resend has arrived by then
    expect(s.received).toHaveLength(bodies.length);
    const counts = copies(s.received);
    for (const b of bodies) expect(counts.get(Buffer.from(b).toString('latin1'))).toBe(1);
  });

  it('no retry on a reused keep-alive socket that the server kills after reading', async () => {
    let mode: 'ok' | 'kill' = 'ok';
    const sockets = new Set<net.Socket>();
    const s = await httpServer((req, res) => {
      sockets.add(req.socket);
      if (mode === 'ok') answer(res, 200, '{"code":"0000"}');
      else req.socket.destroy();
    });
    const c = client({ baseUrl: s.url });
    expect((await c.transfer('{"guid":"ka-1"}', 'ka-1')).kind).toBe('definite');
    mode = 'kill';
    await nextTurn();
    const out = await c.transfer('{"guid":"ka-2"}', 'ka-2');
    expect(out).toMatchObject({ kind: 'unknown', reason: 'reset' });
    await c.closed(); // a (wrong) automatic resend has arrived by then
    expect(sockets.size).toBe(1); // the second request really went over the reused socket
    expect(s.received.map((r) => r.body.toString())).toEqual(['{"guid":"ka-1"}', '{"guid":"ka-2"}']);
  });

  it('stale keep-alive, deterministic: a reused socket answered with RST before the request is processed → unknown/reset', async () => {
    const requestsPerSocket: number[] = [];
    const server = net.createServer((sock) => {
      const idx = requestsPerSocket.push(0) - 1;
      sock.on('data', (d: Buffer) => {
        if (!d.includes('\r\n\r\n')) return;
        if (requestsPerSocket[idx] === 0) {
          requestsPerSocket[idx] = 1;
          sock.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\nconnection: keep-alive\r\n\r\n{"code":"0000"}');
        } else {
          sock.resetAndDestroy(); // as if the server had closed the idle socket just before our bytes arrived
        }
      });
      sock.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.add(() => new Promise<void>((r) => server.close(() => r())));
    const { port } = server.address() as net.AddressInfo;
    const c = client({ baseUrl: `http://127.0.0.1:${port}` });
    expect((await c.transfer('{"guid":"s-1"}', 's-1')).kind).toBe('definite');
    await nextTurn();
    const out = await c.transfer('{"guid":"s-2"}', 's-2');
    expect(out).toMatchObject({ kind: 'unknown', reason: 'reset' });
    await c.closed(); // a (wrong) automatic resend has arrived by then
    expect(requestsPerSocket).toEqual([1]); // one socket, reused; no second connection carrying a resend
  });

  it('stale keep-alive: server closes idle sockets right after answering → the race happens, and is never failed, never two copies', async () => {
    let n = 0;
    const s = await httpServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', connection: 'keep-alive', 'keep-alive': 'timeout=5' });
      const d = n++ % 4; // close the now idle socket 0–3 ms after answering, racing the client's next request
      res.end('{"code":"0000"}', () => setTimeout(() => req.socket.destroy(), d));
    });
    const c = client({ baseUrl: s.url });
    const outcomes: CallOutcome[] = [];
    const bodies: string[] = [];
    // The server only ever answers 200, so an unknown outcome is a request that met the closing socket: the
    // race under test. It lands in about one call in 40 here; call until it has happened a few times.
    let races = 0;
    for (let i = 0; i < 400 && races < 3; i++) {
      const body = `{"guid":"stale-${i}","amount":1}`;
      bodies.push(body);
      const out = await c.transfer(body, `stale-${i}`);
      outcomes.push(out);
      if (out.kind === 'unknown') races++;
      await sleep(i % 3); // the point: 0–2 ms between calls, sometimes before the FIN, sometimes after
    }
    expect(races, `requests that met a socket the server was closing, in ${outcomes.length} calls`).toBeGreaterThanOrEqual(1);
    for (const out of outcomes) expect(out.kind).not.toBe('failed');
    await c.closed(); // a (wrong) automatic resend has arrived by then
    const counts = copies(s.received);
    for (const [i, b] of bodies.entries()) {
      const k = counts.get(Buffer.from(b).toString('latin1')) ?? 0;
      expect(k, b).toBeLessThanOrEqual(1);
      if (outcomes[i]?.kind === 'definite') expect(k, b).toBe(1);
    }
  });
});

describe('inquire', () => {
  it('200 with a definite code → processed with the raw body; guid URL-encoded', async () => {
    const body = '{ "code":"B202", "message":"账户不存在" }';
    const s = await httpServer((_req, res) => answer(res, 200, body));
    const out = await client({ baseUrl: s.url }).inquire('g:1/é x');
    expect(out).toEqual({ kind: 'processed', code: 'B202', body });
    expect(s.received[0]?.method).toBe('GET');
    expect(s.received[0]?.url).toBe(`/transfer/${encodeURIComponent('g:1/é x')}`);
  });

  it('404 whose JSON body names the GUID asked about → absent', async () => {
    const s = await httpServer((_req, res) => answer(res, 404, '{"guid":"g:404","code":"E404","message":"no record"}'));
    expect(await client({ baseUrl: s.url }).inquire('g:404')).toEqual({ kind: 'absent' });
  });

  it.each<[string, string]>([
    ['no guid', '{"code":"E404"}'],
    ['another guid', '{"guid":"g-405","code":"E404"}'],
    ['guid twice', '{"guid":"g-404","guid":"g-404"}'],
    ['guid not a string', '{"guid":404}'],
    ['an HTML page', '<html><body>404 Not Found</body></html>'],
    ['an empty body', ''],
    ['a JSON string', '"g-404"'],
    ['guid nested', '{"error":{"guid":"g-404"}}'],
  ])('404 with %s → unknown (a proxy or a wrong base URL also says 404)', async (_n, body) => {
    const s = await httpServer((_req, res) => answer(res, 404, body));
    const out = await client({ baseUrl: s.url }).inquire('g-404');
    expect(out).toMatchObject({ kind: 'unknown', detail: expect.stringContaining('404') });
  });

  it.each<[string, string]>([
    ['another GUID', '{"guid":"SOMEONE-ELSE","code":"0000","message":"transfer done"}'],
    ['guid twice', '{"guid":"g-2","code":"0000","guid":"g-2"}'],
    ['guid not a string', '{"guid":null,"code":"0000"}'],
  ])('200 naming %s → unknown, the account system reached (not processed)', async (_n, body) => {
    const s = await httpServer((_req, res) => answer(res, 200, body));
    expect(await client({ baseUrl: s.url }).inquire('g-2')).toMatchObject({ kind: 'unknown', reached: true, status: 200 });
  });

  it('200 naming the GUID asked about → processed', async () => {
    const body = '{"guid":"g-2","code":"B201"}';
    const s = await httpServer((_req, res) => answer(res, 200, body));
    expect(await client({ baseUrl: s.url }).inquire('g-2')).toEqual({ kind: 'processed', code: 'B201', body });
  });

  it('200 with code twice → unknown, not processed', async () => {
    const s = await httpServer((_req, res) => answer(res, 200, '{"code":"E500","code":"0000"}'));
    expect((await client({ baseUrl: s.url }).inquire('g-2')).kind).toBe('unknown');
  });

  it.each<[string, number, string]>([
    ['500', 500, '{"code":"E500"}'],
    ['200 non-definite code', 200, '{"code":"E400"}'],
    ['200 not JSON', 200, 'ok'],
  ])('%s → unknown, the account system reached', async (_n, status, body) => {
    const s = await httpServer((_req, res) => answer(res, status, body));
    expect(await client({ baseUrl: s.url }).inquire('g-x')).toMatchObject({ kind: 'unknown', reached: true });
  });

  it('refused → unknown (an inquiry never fails), the account system not reached', async () => {
    const port = await freePort();
    expect(await client({ baseUrl: `http://127.0.0.1:${port}` }).inquire('g-r')).toMatchObject({ kind: 'unknown', reached: false });
  });

  it('no answer → unknown after inquiryTimeoutMs', async () => {
    const s = await httpServer(() => undefined);
    const out = await client({ baseUrl: s.url, timeoutMs: 2000, inquiryTimeoutMs: 200 }).inquire('g-t');
    // The inquiry's own limit ended it, not the transfer's.
    expect(out).toEqual({ kind: 'unknown', reached: false, detail: 'no complete answer within 200ms' });
  });
});
