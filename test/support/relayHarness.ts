import { expect } from 'vitest';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import * as E from 'fp-ts/lib/Either.js';
import { request } from 'undici';
import { addKey } from '../../src/relay/auth/keysAdmin.js';
import { openKeyRing, type KeyRing } from '../../src/relay/auth/keyRing.js';
import type { Scope } from '../../src/relay/auth/keysFile.js';
import { serve, type RunningRelay, type ServeOptions } from '../../src/wiring/serve.js';
import { startSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.js';
import { sleep } from './waitFor.js';

export interface Harness {
  readonly relay: RunningRelay;
  readonly sim: Simulator;
  readonly db: string;
  post(body: string | Buffer, headers?: Record<string, string>): Promise<HttpReply>;
  get(path: string): Promise<HttpReply>;
  close(): Promise<void>;
}

export interface HttpReply {
  readonly status: number;
  readonly body: string;
  readonly headers: Record<string, string | string[] | undefined>;
  json(): Record<string, unknown>;
}

export async function httpRequest(url: string, init: { method: 'GET' | 'POST'; body?: string | Buffer; headers?: Record<string, string> }): Promise<HttpReply> {
  const res = await request(url, { method: init.method, body: init.body ?? null, headers: { 'content-type': 'application/json', ...init.headers } });
  const body = Buffer.from(await res.body.arrayBuffer()).toString('utf8');
  return { status: res.statusCode, body, headers: res.headers, json: () => JSON.parse(body) as Record<string, unknown> };
}

/** A reply from fastify's `inject()`, in the shape of one read from a socket. */
function injected(res: { statusCode: number; body: string; headers: Record<string, string | string[] | number | undefined> }): HttpReply {
  const headers = Object.fromEntries(Object.entries(res.headers).map(([k, v]) => [k, typeof v === 'number' ? String(v) : v]));
  return { status: res.statusCode, body: res.body, headers, json: () => JSON.parse(res.body) as Record<string, unknown> };
}

/**
 * Resends each body to `url`'s POST /v1/transfers every 200 ms until a definite answer (0000, B2xx, E500), for at
 * most 60 s each, as a channel does after a failover or a restore; the codes, in the bodies' order.
 */
export async function resendUntilDefinite(url: string, bodies: readonly string[]): Promise<string[]> {
  return Promise.all(bodies.map(async (body) => {
    for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(200)) {
      const r = await httpRequest(`${url}/v1/transfers`, { method: 'POST', body }).catch(() => null);
      if (r !== null && /^(0000|B2\d\d|E500)$/.test(String(r.json()['code']))) return String(r.json()['code']);
    }
    return 'no definite answer within 60 s';
  }));
}

/**
 * A relay (`serve`, the real one) on a real SQLite file and a real simulator, both on loopback sockets. `post` and
 * `get` go through a socket too, unless `via: 'inject'`: then through fastify's `inject()`, the same routes without
 * a connection, for tests of what a reply says (a test of connections, timeouts or TLS keeps the socket).
 */
export async function startHarness(dir: string, opts: { sim?: SimulatorOptions; relay?: Partial<ServeOptions>; via?: 'socket' | 'inject' } = {}): Promise<Harness> {
  const sim = await startSimulator({ port: 0, ...opts.sim });
  const db = join(dir, 'ledger.db');
  const relay = await serve({
    port: 0, host: '127.0.0.1', db, accountUrl: sim.url, timeoutMs: 1000, graceMs: 1000, maxAttempts: 3,
    synchronous: 'FULL', busyTimeoutMs: 1000, logLevel: 'silent', out: () => {}, ...opts.relay,
  });
  const viaInject = opts.via === 'inject';
  return {
    relay, sim, db,
    post: async (body, headers = {}) =>
      viaInject
        ? injected(await relay.app.inject({ method: 'POST', url: '/v1/transfers', payload: body, headers: { 'content-type': 'application/json', ...headers } }))
        : httpRequest(`${relay.url}/v1/transfers`, { method: 'POST', body, headers }),
    get: async (path) => (viaInject ? injected(await relay.app.inject({ method: 'GET', url: path })) : httpRequest(`${relay.url}${path}`, { method: 'GET' })),
    async close() {
      await relay.close();
      await sim.close();
    },
  };
}

/** A keys file at `path` with these keys (name → scopes), opened as `serve --keys` opens it, and their tokens by name. */
export function makeKeys(path: string, keys: Readonly<Record<string, readonly Scope[]>>): { ring: KeyRing; tokens: Record<string, string> } {
  const tokens: Record<string, string> = {};
  for (const [name, scopes] of Object.entries(keys)) {
    const r = addKey(path, name, [...scopes]);
    if (E.isLeft(r)) throw new Error(r.left.message);
    tokens[name] = r.right.token;
  }
  const ring = openKeyRing(path);
  if (E.isLeft(ring)) throw new Error(ring.left.message);
  return { ring: ring.right, tokens };
}

let counter = 0;
export function transfer(over: Record<string, unknown> = {}): Record<string, unknown> {
  counter++;
  return { guid: `T-${process.pid}-${counter}`, from: 'ACC-1001', to: 'ACC-2002', amount: 100, currency: 'CNY', ...over };
}

/** `n` new transfers' bodies, each with a GUID of its own. */
export const transferBodies = (n: number): string[] => Array.from({ length: n }, () => JSON.stringify(transfer()));

/** Each body POSTed to `url`'s /v1/transfers at once; the codes answered, in the bodies' order. */
export async function replyCodes(url: string, bodies: readonly string[]): Promise<string[]> {
  const replies = await Promise.all(bodies.map((body) => httpRequest(`${url}/v1/transfers`, { method: 'POST', body })));
  return replies.map((r) => String(r.json()['code']));
}

/** Each body POSTed at once, every one answered 0000. */
export async function allApplied(url: string, bodies: readonly string[]): Promise<void> {
  expect(new Set(await replyCodes(url, bodies))).toEqual(new Set(['0000']));
}

/** Rows in the ledger file at `db`, read through a connection of its own. */
export function ledgerRowCount(db: string): number {
  const d = new Database(db, { readonly: true });
  const n = (d.prepare('SELECT COUNT(*) AS n FROM ledger').get() as { n: number }).n;
  d.close();
  return n;
}

export { freePort } from './children.js';
