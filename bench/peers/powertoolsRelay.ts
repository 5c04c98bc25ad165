/**
 * guidgate's job done with AWS Powertools idempotency (`@aws-lambda-powertools/idempotency`) on Redis, as its README
 * and the `CachePersistenceLayer` documentation recommend: a connected `@redis/client` handed to the cache
 * persistence layer, the function that calls the account system wrapped with `makeIdempotent`, the key taken from
 * the payload by JMESPath (`guid`), the call's time limit registered as the invocation's remaining time (below),
 * every other setting its default. The library is framework-free; the app is fastify, as guidgate's. A resend gets
 * the answer the wrapped function returned the first time; one that comes while the first is in flight gets 409.
 *
 * Usage: node dist/bench/peers/powertoolsRelay.js --account-url URL [--redis redis://127.0.0.1:6379/15] [--port 0]
 */
import Fastify from 'fastify';
import { createClient } from '@redis/client';
import { IdempotencyAlreadyInProgressError, IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { accountCaller, announce, CALL_TIMEOUT_MS, closeOnSignal, JSON_TYPE, peerOptions, type Answer } from './peerRelay.js';

const options = peerOptions();
const account = accountCaller(options.accountUrl);
const client = await createClient({ url: options.redisUrl }).connect();
const persistenceStore = new CachePersistenceLayer({ client });

const config = new IdempotencyConfig({ eventKeyJmesPath: 'guid' });
// Outside Lambda there is no invocation deadline: the call's own time limit stands in for it, so that a record left
// in progress by a crash may be taken again once the call could no longer be running (without one the library warns
// on every request and such a record blocks its key until it expires, an hour later).
type LambdaContext = Parameters<IdempotencyConfig['registerLambdaContext']>[0];
config.registerLambdaContext({ getRemainingTimeInMillis: () => CALL_TIMEOUT_MS } as unknown as LambdaContext);
const transferOnce = makeIdempotent(async (transfer: Record<string, unknown>): Promise<Answer> => account.call(JSON.stringify(transfer)), {
  persistenceStore,
  config,
});

const app = Fastify({ logger: false });
app.post('/v1/transfers', async (req, reply) => {
  try {
    const answer = await transferOnce(req.body as Record<string, unknown>);
    return reply.code(answer.status).header('content-type', JSON_TYPE).send(answer.body);
  } catch (err) {
    if (err instanceof IdempotencyAlreadyInProgressError) return reply.code(409).send({ message: 'in progress' });
    // The library deleted the record of a call that threw: a resend calls again.
    return reply.code(504).send({ message: 'account system call failed' });
  }
});

await app.listen({ port: options.port, host: options.host });
announce('powertools relay', app.server);
closeOnSignal(async () => {
  await app.close();
  await account.close();
  await client.close();
});
