import type { FastifyInstance, RouteOptions } from 'fastify';
import { accessFor } from './auth/authHook.js';
import { REPLY_CODES, type ReplyCode } from '../contract/codes.js';
import { errorReply } from './operator/schemas.js';

/** A reply documented by its contract code (its schema is the error reply's) or by its own schema. */
export type ResponseDoc = ReplyCode | `${ReplyCode} ${string}` | { readonly description: string; readonly schema?: object; readonly contentType?: string };

/**
 * What a route says about itself for `/openapi.json` (route option `config.openapi`). Its path, query and body
 * schemas are the route's fastify `schema`, the ones it validates with; `params` and `body` here are only for the
 * channel API's routes, whose input is decoded by the relay's own code (CONTRACT.md §2) and not by a schema.
 */
export interface RouteDoc {
  readonly summary: string;
  readonly params?: object;
  readonly body?: { readonly schema: object; readonly required: boolean };
  readonly headers?: Readonly<Record<string, { readonly description: string; readonly schema: object }>>;
  /** A request to send: the test of this document sends it and checks the reply against `responses`. */
  readonly example: { readonly params?: Record<string, string>; readonly query?: Record<string, string>; readonly body?: unknown; readonly headers?: Record<string, string> };
  readonly responses: Readonly<Record<number, ResponseDoc>>;
}

interface Documented {
  readonly method: 'GET' | 'POST';
  readonly url: string;
  readonly schema: { params?: object; querystring?: object; body?: object } | undefined;
  readonly doc: RouteDoc;
}

/** Collects every route registered with `config.openapi` (call before registering routes) and serves `/openapi.json`. */
export function registerOpenApi(app: FastifyInstance): void {
  const routes: Documented[] = [];
  app.addHook('onRoute', (route: RouteOptions) => {
    const doc = (route.config as { openapi?: RouteDoc } | undefined)?.openapi;
    const methods: readonly string[] = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      if (doc !== undefined && (method === 'GET' || method === 'POST')) routes.push({ method, url: route.url, schema: route.schema as Documented['schema'], doc });
    }
  });
  let document: string | null = null;
  app.get('/openapi.json', {
    config: {
      openapi: {
        summary: 'This document (OpenAPI 3.1): the channel API and the operator API',
        example: {},
        responses: { 200: { description: 'the document', schema: { type: 'object', required: ['openapi', 'paths'] } } },
      } satisfies RouteDoc,
    },
  }, async (_req, reply) => {
    document ??= JSON.stringify(openApiDocument(routes));
    return reply.code(200).header('content-type', 'application/json; charset=utf-8').send(document);
  });
}

const CONTRACT_DESCRIPTION =
  'guidgate relays transfers to a non-idempotent account system at most once per GUID (CONTRACT.md). Every reply that is ' +
  'not the account system\'s own answer is JSON with code and message (E400 adds field). Times are milliseconds since the epoch. ' +
  'With keys on (serve --keys), every route but the public ones needs Authorization: Bearer TOKEN, with the scope named in x-scope. ' +
  'On any path: a malformed URL is 400 E400 (field url), headers over 16 KiB 431 E400, a request not received within --body-timeout ' +
  '408 E400, an unknown route or method 404 E404.';

function responseOf(doc: ResponseDoc): object {
  if (typeof doc === 'string') {
    const [code, ...more] = doc.split(' ') as [ReplyCode, ...string[]];
    const description = more.length > 0 ? `${code}: ${more.join(' ')}` : `${code}: ${REPLY_CODES[code].message}`;
    return { description, content: { 'application/json': { schema: { ...errorReply, properties: { ...errorReply.properties, code: { const: code } } } } } };
  }
  return doc.schema === undefined ? { description: doc.description } : { description: doc.description, content: { [doc.contentType ?? 'application/json']: { schema: doc.schema } } };
}

function parameters(where: 'path' | 'query', schema: object | undefined): object[] {
  const s = schema as { properties?: Record<string, object>; required?: readonly string[] } | undefined;
  return Object.entries(s?.properties ?? {}).map(([name, p]) => ({ name, in: where, required: where === 'path' || (s?.required ?? []).includes(name), schema: p }));
}

function openApiDocument(routes: readonly Documented[]): object {
  const paths: Record<string, Record<string, object>> = {};
  for (const { method, url, schema, doc } of routes) {
    const access = accessFor(method, url);
    const responses: Record<string, object> = {};
    for (const [status, r] of Object.entries(doc.responses)) responses[status] = responseOf(r);
    if (access.kind !== 'public') {
      responses['401'] ??= responseOf('E401 keys are on and the token is missing or unknown');
      responses['403'] ??= responseOf('E403');
    }
    const bodySchema = schema?.body ?? doc.body?.schema;
    const path = url.replace(/:([A-Za-z]+)/g, '{$1}');
    (paths[path] ??= {})[method.toLowerCase()] = {
      summary: doc.summary,
      'x-scope': access.kind === 'public' ? 'none' : access.kind === 'scope' ? access.scope : access.kind === 'read-or-own' ? 'read, or transfer for a GUID this key claimed' : 'any key',
      ...(access.kind === 'public' ? { security: [] } : {}),
      parameters: [
        ...parameters('path', schema?.params ?? doc.params),
        ...parameters('query', schema?.querystring),
        ...Object.entries(doc.headers ?? {}).map(([name, h]) => ({ name, in: 'header', required: false, ...h })),
      ],
      ...(bodySchema === undefined
        ? {}
        : { requestBody: { required: schema?.body === undefined ? doc.body?.required ?? false : false, content: { 'application/json': { schema: bodySchema, ...(doc.example.body === undefined ? {} : { example: doc.example.body }) } } } }),
      responses,
      'x-example': doc.example,
    };
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: { title: 'guidgate', version: 'contract v2', description: CONTRACT_DESCRIPTION },
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'a token made by guidgate keys add' } } },
    security: [{ bearer: [] }],
    paths,
  };
}
