import { createServer, type IncomingMessage, type Server } from 'node:http';
import { request } from 'undici';
import type { SeenCall } from './otlpReceiver.js';
import { listenOnLoopback } from './loopback.js';

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
  const listening = await listenOnLoopback(server);
  return { url: listening.url, calls, close: listening.close };
}
