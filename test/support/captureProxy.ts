import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent, request } from 'undici';
import { listenOnLoopback } from './loopback.js';

/** What the proxy does to the first POST of a GUID (later ones are always forwarded and answered). */
export type FirstSendFault = 'black-hole' | 'drop-answer';

export interface CaptureProxy {
  /** `http://127.0.0.1:port`: point the channel's client here. */
  readonly url: string;
  /** Every POST body as it arrived, per GUID, in order (the bytes the client sent). */
  readonly bodies: Map<string, Buffer[]>;
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function guidOf(body: Buffer): string {
  try {
    const g = (JSON.parse(body.toString('utf8')) as { guid?: unknown }).guid;
    return typeof g === 'string' ? g : '(none)';
  } catch {
    return '(not JSON)';
  }
}

/**
 * A loopback HTTP proxy between a channel and the relay that records the bytes of every POST and can lose the
 * first send of a GUID on the channel's side of the relay: `black-hole` never forwards nor answers it (the
 * client times out, nothing reached the relay); `drop-answer` forwards it and then resets the channel's
 * connection instead of answering (the relay did the work, the client never heard).
 */
export async function startCaptureProxy(target: string, faultFor: (guid: string) => FirstSendFault | undefined): Promise<CaptureProxy> {
  const upstream = new Agent({ pipelining: 1 });
  const bodies = new Map<string, Buffer[]>();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await readBody(req);
    let fault: FirstSendFault | undefined;
    if (req.method === 'POST') {
      const guid = guidOf(body);
      const seen = bodies.get(guid) ?? [];
      seen.push(body);
      bodies.set(guid, seen);
      fault = seen.length === 1 ? faultFor(guid) : undefined;
    }
    if (fault === 'black-hole') return; // the socket stays open until the client gives up
    const headers: Record<string, string> = {};
    for (const name of ['content-type', 'authorization', 'idempotency-key', 'accept']) {
      const v = req.headers[name];
      if (typeof v === 'string') headers[name] = v;
    }
    const up = await request(new URL(req.url ?? '/', target), {
      dispatcher: upstream,
      method: req.method === 'POST' ? 'POST' : 'GET',
      headers,
      ...(req.method === 'POST' ? { body } : {}),
    });
    const answer = Buffer.from(await up.body.arrayBuffer());
    if (fault === 'drop-answer') {
      req.socket.resetAndDestroy();
      return;
    }
    const out: Record<string, string> = {};
    for (const name of ['content-type', 'idempotent-replayed', 'www-authenticate']) {
      const v = up.headers[name];
      if (typeof v === 'string') out[name] = v;
    }
    res.writeHead(up.statusCode, out).end(answer);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => req.socket.destroy());
  });
  const listening = await listenOnLoopback(server);
  return {
    url: listening.url,
    bodies,
    async close() {
      await listening.close();
      await upstream.close();
    },
  };
}
