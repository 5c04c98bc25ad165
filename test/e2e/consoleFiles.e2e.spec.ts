import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Fastify from 'fastify';
import { request } from 'undici';
import { beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_ASSETS, CONSOLE_CSP, registerConsole } from '../../src/relay/console.js';
import { REPO_ROOT } from '../support/children.js';
import { makeKeys, startHarness, type Harness } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';

/** The console's files as `serve` sends them (keys on): public, from a fixed list, under a strict CSP. */
describe('the console files at /console', () => {
  let h: Harness;
  const tmp = useTempDir('file');
  const cleanup = useCleanup('file');
  const built = join(REPO_ROOT, 'dist', 'console');

  beforeAll(async () => {
    const dir = tmp();
    h = cleanup.use(await startHarness(dir, { relay: { keys: makeKeys(join(dir, 'keys'), { ops: ['read', 'admin'] }).ring } }));
  });

  const get = async (path: string, method: 'GET' | 'HEAD' = 'GET') => {
    const res = await request(`${h.relay.url}${path}`, { method });
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
  };

  it('/console redirects to /console/, which is the page, without a token', async () => {
    const redirect = await get('/console');
    expect(redirect.status).toBe(301);
    expect(redirect.headers['location']).toBe('/console/');
    const page = await get('/console/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body).toBe(readFileSync(join(built, 'index.html'), 'utf8'));
    // A data route beside it still needs the token.
    expect((await get('/v1/transfers/SOME-GUID')).status).toBe(401);
  });

  it.each(Object.entries(CONSOLE_ASSETS))('serves %s as %s, byte for byte, under the CSP', async (name, type) => {
    const r = await get(`/console/${name}`);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe(type);
    expect(r.headers['content-security-policy']).toBe(CONSOLE_CSP);
    expect(r.headers['x-content-type-options']).toBe('nosniff');
    expect(r.body).toBe(readFileSync(join(built, name), 'utf8'));
    expect((await get(`/console/${name}`, 'HEAD')).status).toBe(200);
  });

  it('serves every file the build makes, the modules of src/shared the page imports included (a missing one would fail to load)', () => {
    const made = (dir: string, under = ''): string[] =>
      readdirSync(join(dir, under), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? made(dir, join(under, e.name)) : [join(under, e.name)]));
    expect(made(built).sort()).toEqual(Object.keys(CONSOLE_ASSETS).sort());
    expect(Object.keys(CONSOLE_ASSETS)).toEqual(expect.arrayContaining(['shared/money.js', 'shared/plural.js']));
  });

  it('the CSP allows this origin only: no inline script or style, no framing', () => {
    expect(CONSOLE_CSP).toContain("default-src 'none'");
    expect(CONSOLE_CSP).toContain("script-src 'self'");
    expect(CONSOLE_CSP).toContain("frame-ancestors 'none'");
    expect(CONSOLE_CSP).not.toMatch(/unsafe-|\*|data:|https?:/);
  });

  it.each(['/console/../package.json', '/console/%2e%2e/package.json', '/console/..%2fpackage.json', '/console/nope.js', '/console/dist', '/console/index.html/x'])(
    'anything else under /console/ reads no file (E404; a dot segment leaves /console/ and needs a token): %s',
    async (path) => {
      const r = await get(path);
      const code = (JSON.parse(r.body) as { code: string }).code;
      expect(/\.\.|%2e%2e/i.test(path) ? ['E401', 'E404'] : ['E404'], r.body).toContain(code);
      expect(r.status).toBe(code === 'E401' ? 401 : 404);
      expect(r.body).not.toContain('guidgate');
    },
  );

  it('the page has no inline script, style or handler, and the scripts never write HTML', () => {
    const page = readFileSync(join(built, 'index.html'), 'utf8');
    for (const tag of page.match(/<script\b[^>]*>/g) ?? []) expect(tag).toMatch(/\bsrc="(?:[a-z]+\/)?[a-z]+\.js"/);
    expect(page).not.toMatch(/<style|\sstyle=|\son[a-z]+=|javascript:/i);
    for (const js of Object.keys(CONSOLE_ASSETS).filter((n) => n.endsWith('.js'))) {
      expect(readFileSync(join(built, js), 'utf8'), js).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/);
    }
  });

  it('a relay whose console is not built answers E404 saying so', async () => {
    const app = Fastify();
    registerConsole(app, null, (reply, r) => reply.code(r.status).header('content-type', 'application/json; charset=utf-8').send(r.body));
    try {
      const res = await app.inject({ method: 'GET', url: '/console/' });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ code: 'E404', message: expect.stringContaining('npm run build') });
    } finally {
      await app.close();
    }
  });
});
