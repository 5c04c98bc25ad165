import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { request } from 'undici';
import type { SeenCall } from './otlpReceiver.js';

export interface AccountSpy {
  /** Point the relay's --account-url here. */
  readonly url: string;
  /** Every request the account system got through the spy, in order of arrival. */
  readonly calls: SeenCall[];
  close(): Promise<void>;
}

const one = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v.join(',') : v);

/**
 * A loopback HTTP server in front of the account system (the simulator) that records each request's method, path
 * and W3C trace headers, forwards it and relays the answer (a request the simulator holds is held here too).
 */
export async function startAccountSpy(target: string): Promise<AccountSpy> {
  const calls: SeenCall[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      calls.push({ method: req.method ?? '?', url: req.url ?? '?', traceparent: one(req.headers.traceparent), tracestate: one(req.headers.tracestate) });
      void (async () => {
        try {
          const up = await request(`${target}${req.url ?? '/'}`, {
            method: req.method as 'GET' | 'POST',
            headers: { 'content-type': req.headers['content-type'] ?? 'application/json' },
            body: req.method === 'POST' ? Buffer.concat(chunks) : null,
          });
          const body = Buffer.from(await up.body.arrayBuffer());
          res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/json') }).end(body);
        } catch {
          res.destroy();
        }
      })();
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
