/**
 * guidgate's job done with `@node-idempotency/core` on Redis (`@node-idempotency/storage-adapter-redis`), as its
 * README recommends: `onRequest` before the business logic (a stored answer is sent back as it is; a new key is
 * marked in progress with `SET NX`), `onResponse` when the logic is done (the answer stored, the key complete),
 * every option its default. The README points at a fastify plugin (`@node-idempotency/fastify`) that is not
 * published on npm, so the app is fastify with the two calls where that plugin puts them: `onRequest` in a
 * `preHandler` hook, `onResponse` before the reply goes out. The key is the `Idempotency-Key` header (the benchmark
 * sends the GUID there too). A resend while the first is in flight gets 409; a failed call is stored and replayed
 * as the 504 it was, as the plugin does with an error.
 *
 * Usage: node dist/bench/peers/nodeIdempotencyRelay.js --account-url URL [--redis redis://127.0.0.1:6379/15] [--port 0]
 */
import Fastify, { type FastifyRequest } from 'fastify';
import { Idempotency, IdempotencyError, IdempotencyErrorCodes, type IdempotencyParams } from '@node-idempotency/core';
import { RedisStorageAdapter } from '@node-idempotency/storage-adapter-redis';
import { accountCaller, announce, closeOnSignal, JSON_TYPE, peerOptions, type Answer } from './peerRelay.js';

const options = peerOptions();
const account = accountCaller(options.accountUrl);
const storage = new RedisStorageAdapter({ url: options.redisUrl });
await storage.connect();
const idempotency = new Idempotency(storage);

const paramsOf = (req: FastifyRequest): IdempotencyParams => ({
  headers: req.headers,
  body: req.body as Record<string, unknown>,
  path: req.url,
  method: req.method,
});

const app = Fastify({ logger: false });
app.addHook('preHandler', async (req, reply) => {
  try {
    const stored = await idempotency.onRequest(paramsOf(req));
    if (stored === undefined) return; // a new key: on to the handler
    const answer = (stored.body ?? stored.error) as Answer;
    return await reply.code(answer.status).header('content-type', JSON_TYPE).header('idempotent-replayed', 'true').send(answer.body);
  } catch (err) {
    if (!(err instanceof IdempotencyError)) throw err;
    return await reply.code(err.code === IdempotencyErrorCodes.REQUEST_IN_PROGRESS ? 409 : 422).send({ message: err.message });
  }
});
app.post('/v1/transfers', async (req, reply) => {
  let answer: Answer;
  try {
    answer = await account.call(JSON.stringify(req.body));
  } catch {
    answer = { status: 504, body: '{"message":"account system call failed"}' };
  }
  await idempotency.onResponse(paramsOf(req), answer.status < 400 ? { body: answer } : { error: answer });
  return reply.code(answer.status).header('content-type', JSON_TYPE).send(answer.body);
});

await app.listen({ port: options.port, host: options.host });
announce('node-idempotency relay', app.server);
closeOnSignal(async () => {
  await app.close();
  await account.close();
  await storage.disconnect();
});
