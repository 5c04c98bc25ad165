import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One POST the receiver got. */
export interface Received {
  readonly id: string;
  readonly timestamp: string;
  readonly signature: string;
  readonly body: string;
  /** When it arrived (ms since the epoch). */
  readonly at: number;
  /** What the receiver answered (null: held the connection). */
  readonly answered: number | null;
}

/** What the receiver does with the next POST: answer with a status, redirect, or hold the connection open. */
export type Behaviour = { readonly status: number } | { readonly redirect: string } | { readonly hold: true };

/**
 * A real HTTP receiver of notifications on loopback: records every POST, answers as `behave` says (default 204),
 * and can be stopped (connections refused) and started again on the same port.
 */
export async function startReceiver(behave: (r: Omit<Received, 'answered'>, n: number) => Behaviour = () => ({ status: 204 })) {
  const received: Received[] = [];
  const sockets = new Set<Socket>();
  /** POSTs in progress at once, and the most there ever were per webhook-id. */
  const inProgress = new Map<string, number>();
  let maxConcurrentPerId = 0;
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r = {
        id: String(req.headers['webhook-id'] ?? ''),
        timestamp: String(req.headers['webhook-timestamp'] ?? ''),
        signature: String(req.headers['webhook-signature'] ?? ''),
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      const now = (inProgress.get(r.id) ?? 0) + 1;
      inProgress.set(r.id, now);
      maxConcurrentPerId = Math.max(maxConcurrentPerId, now);
      const b = behave(r, received.length);
      const done = (answered: number | null): void => {
        received.push({ ...r, answered });
        inProgress.set(r.id, (inProgress.get(r.id) ?? 1) - 1);
      };
      if ('hold' in b) {
        done(null);
        return;
      }
      // A little time inside the handler, so that two relays delivering one notification at once would overlap here.
      setTimeout(() => {
        if ('redirect' in b) res.writeHead(307, { location: b.redirect }).end();
        else res.writeHead(b.status).end();
        done('redirect' in b ? 307 : b.status);
      }, 20);
    });
  };
  let server: Server = createServer(handler);
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server = createServer(handler);
      server.on('connection', (s) => {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
    });
  const port = await listen(0);
  const stop = () =>
    new Promise<void>((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    maxConcurrentPerId: () => maxConcurrentPerId,
    /** Stops listening (connections refused) until `start`. */
    stop,
    start: () => listen(port),
    close: stop,
  };
}

/** The Standard Webhooks check a channel makes: the signature over `{id}.{timestamp}.{body}` with the secret. */
export function signatureValid(secret: Buffer, r: Pick<Received, 'id' | 'timestamp' | 'signature' | 'body'>): boolean {
  const expected = createHmac('sha256', secret).update(`${r.id}.${r.timestamp}.${r.body}`).digest();
  return r.signature.split(' ').some((s) => {
    const [version, sig] = s.split(',');
    if (version !== 'v1' || sig === undefined) return false;
    const got = Buffer.from(sig, 'base64');
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
}
