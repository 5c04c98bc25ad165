/**
 * guidgate's job done with `express-idempotency` on Redis, as its README and that of its Redis adapter
 * (`express-idempotency-redis-adapter`) recommend: an Express app, `express.json()`, the middleware with the adapter
 * as `dataAdapter`, the route asking `isHit(req)` before it does anything, every other setting its default. The key
 * is the `Idempotency-Key` header (the benchmark sends the GUID there too). A resend gets the saved status and body;
 * one that comes while the first is in flight gets 409. The middleware saves the answer after it is sent, without
 * waiting (its design), and a failed call is reported with `reportError`, which deletes the record.
 *
 * Usage: node dist/bench/peers/expressIdempotencyRelay.js --account-url URL [--redis redis://127.0.0.1:6379/15] [--port 0]
 */
import { createRequire } from 'node:module';
import type { Server } from 'node:net';
import express from 'express';
import { getSharedIdempotencyService, idempotency, type IIdempotencyDataAdapter } from 'express-idempotency';
import { accountCaller, announce, closeOnSignal, JSON_TYPE, peerOptions } from './peerRelay.js';

// The adapter ships no types, and its default export is CommonJS `exports.default`.
type RedisAdapter = IIdempotencyDataAdapter & { connect(): Promise<void>; disconnect(): Promise<void> };
const { default: RedisAdapterClass } = createRequire(import.meta.url)('express-idempotency-redis-adapter') as {
  default: new (options: { connectionConfig: { url: string } }) => RedisAdapter;
};

const options = peerOptions();
const account = accountCaller(options.accountUrl);
const adapter = new RedisAdapterClass({ connectionConfig: { url: options.redisUrl } });
await adapter.connect();

const app = express();
app.use(express.json());
app.use(idempotency({ dataAdapter: adapter }));
app.post('/v1/transfers', async (req, res) => {
  const service = getSharedIdempotencyService();
  if (service.isHit(req)) return;
  try {
    const answer = await account.call(JSON.stringify(req.body));
    res.status(answer.status).type(JSON_TYPE).send(answer.body);
  } catch {
    await service.reportError(req);
    res.status(504).json({ message: 'account system call failed' });
  }
});

const server: Server = await new Promise((resolve) => {
  const s = app.listen(options.port, options.host, () => resolve(s));
});
announce('express-idempotency relay', server);
closeOnSignal(async () => {
  await new Promise((resolve) => server.close(resolve));
  await account.close();
  await adapter.disconnect();
});
