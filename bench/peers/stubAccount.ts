/**
 * The account system of `npm run bench:peers`: `POST /transfer` answers 0000 at once, naming the GUID of the body.
 * No journal, no balances, no faults: unlike the bundled simulator it costs less than the relays in front of it, so
 * that the load they can carry is theirs. `GET /stats` gives `{ posts }`, the calls received, so that the benchmark
 * can tell that a relay forwarded each new GUID once and no replay.
 *
 * Usage: node dist/bench/peers/stubAccount.js [--port 0] [--host 127.0.0.1]
 */
import { parseArgs } from 'node:util';
import Fastify from 'fastify';
import { announce, closeOnSignal } from './peerRelay.js';

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' }, host: { type: 'string', default: '127.0.0.1' } } });

let posts = 0;
const app = Fastify({ logger: false });
app.post('/transfer', async (req, reply) => {
  posts++;
  const guid = (req.body as { guid?: unknown } | null)?.guid;
  return reply
    .header('content-type', 'application/json; charset=utf-8')
    .send(JSON.stringify({ guid: typeof guid === 'string' ? guid : null, code: '0000', message: 'transfer done', txId: `tx-${posts}` }));
});
app.get('/stats', async () => ({ posts }));

await app.listen({ port: Number(values.port), host: values.host });
announce('stub account system', app.server);
closeOnSignal(() => app.close());
