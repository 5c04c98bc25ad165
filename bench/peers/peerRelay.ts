/**
 * What the peer relays of `npm run bench:peers` share: their command line, the account call and the line that says
 * where they listen. Each peer is a small HTTP app wired as its library's README recommends, doing guidgate's job
 * and no more: take `POST /v1/transfers`, forward the body once to the account system's `POST /transfer` with
 * undici (a pool as the naive relay's, src/relay/naive.ts), keep the answer in Redis under the transfer's GUID and
 * replay it to every resend.
 */
import type { Server } from 'node:net';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';

export interface PeerOptions {
  readonly port: number;
  readonly host: string;
  readonly accountUrl: string;
  /** `redis://host:port/db`: the records go into that Redis database. */
  readonly redisUrl: string;
}

export function peerOptions(): PeerOptions {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      host: { type: 'string', default: '127.0.0.1' },
      'account-url': { type: 'string' },
      redis: { type: 'string', default: 'redis://127.0.0.1:6379/15' },
    },
  });
  if (values['account-url'] === undefined) throw new Error('--account-url is required');
  return { port: Number(values.port), host: values.host, accountUrl: values['account-url'], redisUrl: values.redis };
}

/** The account system's answer, as the relay passes it on: status 200 with its body, or 504 when it was not 200. */
export interface Answer {
  readonly status: number;
  readonly body: string;
}

export const JSON_TYPE = 'application/json; charset=utf-8';

/** The time limit of one account call (guidgate's default `--timeout`). */
export const CALL_TIMEOUT_MS = 3000;

/**
 * `POST {accountUrl}/transfer` with the body, as the naive relay makes it (128 connections, no retry). A failed call
 * throws: each peer then does what its README says for a failed operation.
 */
export function accountCaller(accountUrl: string): { call: (body: string) => Promise<Answer>; close: () => Promise<void> } {
  const pool = new Pool(accountUrl, { connections: 128, headersTimeout: CALL_TIMEOUT_MS, bodyTimeout: CALL_TIMEOUT_MS });
  return {
    async call(body) {
      const res = await pool.request({ method: 'POST', path: '/transfer', body, headers: { 'content-type': 'application/json' } });
      const text = await res.body.text();
      return { status: res.statusCode === 200 ? 200 : 504, body: text };
    },
    close: () => pool.close(),
  };
}

/** The line the benchmark waits for (the same words as guidgate's `serve` and `naive`), once `server` listens. */
export function announce(name: string, server: Server): void {
  const address = server.address();
  if (address === null || typeof address !== 'object') throw new Error(`${name} is not listening on a TCP port`);
  process.stdout.write(`${name} listening on http://${address.address}:${address.port}\n`);
}

/** Runs `close` on SIGTERM or SIGINT, then exits (after a second at most: keep-alive connections may hold it). */
export function closeOnSignal(close: () => Promise<void>): void {
  const stop = () => {
    setTimeout(() => process.exit(0), 1000).unref();
    void close().finally(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
