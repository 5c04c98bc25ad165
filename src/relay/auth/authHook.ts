import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import * as E from 'fp-ts/lib/Either.js';
import type { EventStore } from '../../events/store.js';
import { codeReply, ledgerLog, ledgerUnavailableReply, type Reply } from '../replies.js';
import { GUID_PATTERN } from '../../contract/transferRequest.js';
import { findKey, type Key, type Scope } from './keysFile.js';

/**
 * What a route asks of the caller (CONTRACT.md §6):
 * - `public`: holds no data (health, the API description, the console's static files);
 * - `scope`: a key with that scope;
 * - `read-or-own`: `read`, or `transfer` for a GUID this key claimed (any other GUID is E404 to it);
 * - `any-key`: a route that does not exist, so that a 404 tells nothing to a caller without a key.
 */
export type Access =
  | { readonly kind: 'public' }
  | { readonly kind: 'scope'; readonly scope: Scope }
  | { readonly kind: 'read-or-own' }
  | { readonly kind: 'any-key' };

const PUBLIC: Access = { kind: 'public' };
const need = (scope: Scope): Access => ({ kind: 'scope', scope });

/**
 * Keyed by method and route pattern (not by URL), so that a data route added later under `/console/` is not
 * public by accident. A route missing here needs `admin`: new operator routes are closed until listed.
 */
export const ROUTE_ACCESS: Readonly<Record<string, Access>> = {
  'GET /healthz': PUBLIC,
  'GET /openapi.json': PUBLIC,
  'GET /console': PUBLIC,
  'GET /console/': PUBLIC,
  'GET /console/*': PUBLIC,
  'POST /v1/transfers': need('transfer'),
  'GET /v1/transfers/:guid': { kind: 'read-or-own' },
  'GET /metrics': need('read'),
  'GET /v1/transfers/:guid/events': need('read'),
  'GET /v1/ledger': need('read'),
  'GET /v1/stats': need('read'),
  'GET /v1/reconciliations': need('read'),
  'GET /v1/reconciliations/:id': need('read'),
};

/** `route`: the matched route pattern, undefined when no route matched (the 404 handler). */
export function accessFor(method: string, route: string | undefined): Access {
  if (route === undefined) return { kind: 'any-key' };
  // HEAD is answered by the GET route.
  return ROUTE_ACCESS[`${method === 'HEAD' ? 'GET' : method} ${route}`] ?? need('admin');
}

const BEARER = /^Bearer +(\S+) *$/i;

export function bearerToken(header: string | undefined): string | null {
  if (header === undefined) return null;
  return BEARER.exec(header)?.[1] ?? null;
}

/**
 * Whether a caller of a public route may be told details an operator needs and others must not learn (the
 * database's hosts, ports and user in /healthz's reason): keys off (open mode, where every route is open), or a
 * key with the `read` or `admin` scope.
 */
export function seesDetails(keys: (() => readonly Key[]) | undefined, authorization: string | undefined): boolean {
  if (keys === undefined) return true;
  const token = bearerToken(authorization);
  const key = token === null ? null : findKey(keys(), token);
  return key !== null && (key.scopes.has('read') || key.scopes.has('admin'));
}

const authenticated = new WeakMap<FastifyRequest, Key>();

/** The key that authenticated this request; undefined without keys (open mode) or on a public route. */
export function requestKey(req: FastifyRequest): Key | undefined {
  return authenticated.get(req);
}

export interface AuthDeps {
  /** The keys in force now (they change on SIGHUP). */
  readonly keys: () => readonly Key[];
  readonly store: Pick<EventStore, 'getLedger'>;
  /** Sends a reply in the contract's shape and counts it (the app's `SendReply`). */
  readonly send: (reply: FastifyReply, r: Reply) => FastifyReply;
  /** Told the name of every key that authenticates a request (its last use: `keys list --db`). */
  readonly used?: (key: string) => void;
}

/**
 * Checks every request in `onRequest`, before its body is read: a refused request stores nothing and sends
 * nothing. Log lines name the key, never the token.
 */
export function registerAuth(app: FastifyInstance, deps: AuthDeps): void {
  const refuse = (reply: FastifyReply, r: Reply): FastifyReply => {
    if (r.code === 'E401') reply.header('www-authenticate', 'Bearer');
    return deps.send(reply, r);
  };

  app.addHook('onRequest', async (req, reply) => {
    const access = accessFor(req.method, req.routeOptions.url);
    if (access.kind === 'public') return;
    const token = bearerToken(req.headers.authorization);
    const key = token === null ? null : findKey(deps.keys(), token);
    if (key === null) {
      req.log.warn({ method: req.method, route: req.routeOptions.url ?? null, reason: token === null ? 'no bearer token' : 'unknown token' }, 'refused: E401');
      return refuse(reply, codeReply('E401', undefined, { message: token === null ? 'this route needs Authorization: Bearer TOKEN' : 'unknown token' }));
    }
    authenticated.set(req, key);
    deps.used?.(key.name);
    if (access.kind === 'any-key') return;
    if (access.kind === 'scope') {
      if (key.scopes.has(access.scope)) return;
      req.log.warn({ key: key.name, route: req.routeOptions.url, needs: access.scope }, 'refused: E403');
      return refuse(reply, codeReply('E403', undefined, { message: `the key ${key.name} lacks the scope ${access.scope}` }));
    }
    // read-or-own
    if (key.scopes.has('read')) return;
    if (!key.scopes.has('transfer')) {
      req.log.warn({ key: key.name, route: req.routeOptions.url, needs: 'read' }, 'refused: E403');
      return refuse(reply, codeReply('E403', undefined, { message: `the key ${key.name} lacks the scope read` }));
    }
    const guid = (req.params as Record<string, string | undefined>)['guid'] ?? '';
    if (!GUID_PATTERN.test(guid)) return; // the route answers E400 naming the field
    const read = await deps.store.getLedger(guid);
    if (E.isLeft(read)) return refuse(reply, ledgerUnavailableReply(guid, read.left, ledgerLog(req.log)));
    // Another key's GUID looks exactly like one that does not exist.
    if (read.right === null || read.right.channel !== key.name) return refuse(reply, codeReply('E404', guid));
    return;
  });
}
