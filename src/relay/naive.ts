import Fastify from 'fastify';
import { Pool } from 'undici';

/**
 * The relay the seed started from: it forwards whatever it receives and keeps nothing. Every resend is a
 * new call, so a timeout upstream becomes a double debit. For the demo and the benchmark only; `serve`
 * never runs without its ledger.
 */
export async function startNaive(opts: { port: number; host: string; accountUrl: string; timeout: number }) {
  const pool = new Pool(opts.accountUrl, { connections: 128, headersTimeout: opts.timeout, bodyTimeout: opts.timeout });
  const app = Fastify({ logger: false, bodyLimit: 64 * 1024 });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.post('/v1/transfers', async (req, reply) => {
    try {
      const res = await pool.request({ method: 'POST', path: '/transfer', body: req.body as Buffer, headers: { 'content-type': 'application/json' } });
      const text = await res.body.text();
      return reply.code(res.statusCode === 200 ? 200 : 504).header('content-type', 'application/json; charset=utf-8').send(text);
    } catch {
      return reply.code(504).header('content-type', 'application/json; charset=utf-8').send('{"code":"E901","message":"sent, outcome unknown"}');
    }
  });
  await app.listen({ port: opts.port, host: opts.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : opts.port;
  return {
    url: `http://${opts.host}:${port}`,
    async close() {
      await app.close();
      await pool.close();
    },
  };
}
