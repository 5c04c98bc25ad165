import { createServer, type ServerResponse } from 'node:http';
import { listenOnLoopback } from './loopback.js';

/**
 * An account system whose answers the test gives: every `POST /transfer` is held until `release(guid, body)`, then
 * answered 200 with exactly `body`; an inquiry (`GET /transfer/{guid}`) answers the released body, or 404 naming the
 * GUID before. So a call stays in flight, and the ledger row SENT, for as long as the test wants.
 */
export interface GatedAccount {
  readonly url: string;
  /** `POST /transfer` calls received per GUID. */
  calls(guid: string): number;
  /** Answers every held call of `guid` (and every later one, and inquiries) with `body`, byte for byte. */
  release(guid: string, body: string): void;
  close(): Promise<void>;
}

export async function startGatedAccount(): Promise<GatedAccount> {
  const held = new Map<string, ServerResponse[]>();
  const answers = new Map<string, string>();
  const calls = new Map<string, number>();
  const answer = (res: ServerResponse, body: string): void => void res.writeHead(200, { 'content-type': 'application/json' }).end(body);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/transfer') {
        const guid = String((JSON.parse(Buffer.concat(chunks).toString()) as { guid: unknown }).guid);
        calls.set(guid, (calls.get(guid) ?? 0) + 1);
        const body = answers.get(guid);
        if (body !== undefined) return answer(res, body);
        held.set(guid, [...(held.get(guid) ?? []), res]);
        return;
      }
      const m = /^\/transfer\/([^/?]+)$/.exec(req.url ?? '');
      if (req.method === 'GET' && m !== null) {
        const guid = decodeURIComponent(m[1]!);
        const body = answers.get(guid);
        if (body !== undefined) return answer(res, body);
        return void res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ guid, code: 'NOT_FOUND' }));
      }
      res.writeHead(404).end();
    });
  });
  const listening = await listenOnLoopback(server);
  return {
    url: listening.url,
    calls: (guid) => calls.get(guid) ?? 0,
    release(guid, body) {
      answers.set(guid, body);
      for (const res of held.get(guid) ?? []) answer(res, body);
      held.delete(guid);
    },
    close: listening.close,
  };
}
