import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { packageRoot } from '../shared/packageRoot.js';
import { codeReply, type Reply } from './replies.js';

/**
 * The console's files, the only ones served under /console/ (a fixed list: no path from the URL ever reaches
 * the file system). `npm run build` puts them in `dist/console/` (`tsconfig.console.json` and
 * `scripts/buildConsole.mjs`), which the package ships: the page's modules under `console/`, the rules they share
 * with the command line under `shared/` (as in `src/`, so that their imports resolve as written).
 */
export const CONSOLE_ASSETS: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
  'console/console.js': 'text/javascript; charset=utf-8',
  'console/api.js': 'text/javascript; charset=utf-8',
  'shared/money.js': 'text/javascript; charset=utf-8',
  'shared/plural.js': 'text/javascript; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

/**
 * The console runs only its own files: no inline script or style, no other origin, no framing (its buttons
 * resolve and reprocess transfers), and its data calls go to this origin only.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Where the built console is: `dist/console` of guidgate's package, from `src` (tests) and `dist/src` alike. */
export function defaultConsoleDir(): string | null {
  const root = packageRoot();
  return root === null ? null : join(root.dir, 'dist', 'console');
}

/**
 * GET /console (a redirect, so that the page's relative addresses resolve under /console/), /console/ and the
 * assets. Public with keys on (CONTRACT.md §6: they hold no data); every data call the page makes carries the
 * token. `send` is the app's reply function (metrics included).
 */
export function registerConsole(app: FastifyInstance, dir: string | null, send: (reply: FastifyReply, r: Reply) => FastifyReply): void {
  const notBuilt = codeReply('E404', undefined, { message: 'the console is not built: run `npm run build`' });
  const asset = async (reply: FastifyReply, name: string) => {
    const type = CONSOLE_ASSETS[name];
    if (type === undefined) return send(reply, codeReply('E404', undefined, { message: 'no such console file' }));
    if (dir === null) return send(reply, notBuilt);
    let body: Buffer;
    try {
      body = await readFile(join(dir, name));
    } catch {
      return send(reply, notBuilt);
    }
    return reply
      .code(200)
      .header('content-type', type)
      .header('content-security-policy', CONSOLE_CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-cache')
      .send(body);
  };
  app.get('/console', (_req, reply) => reply.redirect('/console/', 301));
  app.get('/console/', (_req, reply) => asset(reply, 'index.html'));
  app.get<{ Params: { '*': string } }>('/console/*', (req, reply) => asset(reply, req.params['*']));
}
