import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { Agent, request } from 'undici';
import { describe, it, expect, beforeAll } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { makePki, type Pki } from '../support/certs.js';
import { REPO_ROOT } from '../support/children.js';
import { httpRequest, transfer } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { sigkillAndWait } from '../support/settle.js';
import { waitFor } from '../support/waitFor.js';

/** Keys, open mode and TLS through the real `./bin/guidgate` (`npm run build` first). */
const BIN = join(REPO_ROOT, 'bin', 'guidgate');

function guidgate(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

interface Served {
  readonly child: ChildProcess;
  readonly ready: Promise<string>;
  /** stdout and stderr so far. */
  output(): string;
  exited: Promise<number | null>;
}

function startServe(args: string[]): Served {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const ready = new Promise<string>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /listening on (https?:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => reject(new Error(`serve exited ${code}: ${out}`)));
  });
  ready.catch(() => undefined);
  return { child, ready, output: () => out, exited };
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe('keys, open mode and TLS through ./bin/guidgate', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const serve = (args: string[]) => {
    const s = startServe(args);
    cleanup.add(() => sigkillAndWait(s.child));
    return s;
  };
  const simulator = async (): Promise<Simulator> => cleanup.use(await startSimulator({ port: 0 }));
  const addKey = (keys: string, name: string, scopes: string) => {
    const r = guidgate(['keys', 'add', name, '--scopes', scopes, '--keys', keys]);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
  };

  it('keys add, list, remove: file 0600, the token printed once alone, list never shows hashes', () => {
    const dir = tmp();
    const keys = join(dir, 'sub', 'keys');
    const add = guidgate(['keys', 'add', 'bank-a', '--scopes', 'transfer,read', '--keys', keys]);
    expect(add.code).toBe(0);
    expect(add.stdout).toMatch(/^gg_[A-Za-z0-9_-]{43}\n$/);
    const token = add.stdout.trim();
    expect(statSync(keys).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'sub')).mode & 0o777).toBe(0o700);
    const file = readFileSync(keys, 'utf8');
    expect(file).not.toContain(token);
    expect(file).toMatch(/^# bank-a created \S+Z\nbank-a transfer,read sha256:[0-9a-f]{64}\n$/);

    // GUIDGATE_KEYS names the file like --keys does.
    expect(guidgate(['keys', 'add', 'ops', '--scopes', 'admin'], { GUIDGATE_KEYS: keys }).code).toBe(0);
    const dup = guidgate(['keys', 'add', 'bank-a', '--scopes', 'read', '--keys', keys]);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toContain('already exists');
    expect(dup.stdout).toBe('');
    expect(guidgate(['keys', 'add', 'x', '--scopes', 'transfer,root', '--keys', keys]).code).toBe(2);
    expect(guidgate(['keys', 'add', 'bad name!', '--scopes', 'read', '--keys', keys]).code).toBe(2);

    const list = guidgate(['keys', 'list', '--keys', keys]);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^bank-a\ttransfer,read\t\S+Z\t-\nops\tadmin\t\S+Z\t-\n$/);
    expect(list.stdout).not.toMatch(/sha256|[0-9a-f]{16}/);

    expect(guidgate(['keys', 'remove', 'bank-a', '--keys', keys]).code).toBe(0);
    expect(guidgate(['keys', 'list', '--keys', keys]).stdout).toMatch(/^ops\tadmin\t\S+Z\t-\n$/);
    expect(statSync(keys).mode & 0o777).toBe(0o600);
    const again = guidgate(['keys', 'remove', 'bank-a', '--keys', keys]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('no key named bank-a');
  });

  it('SIGHUP re-reads the keys file; a bad file keeps the old keys and says why; no token reaches the output', async () => {
    const dir = tmp();
    const keys = join(dir, 'keys');
    const sim = await simulator();
    const oldToken = addKey(keys, 'old', 'transfer');
    const s = serve(['--keys', keys, '--db', join(dir, 'l.db'), '--account-url', sim.url, '--log-level', 'info']);
    const url = await s.ready;
    const post = (token: string) => httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(transfer()), headers: bearer(token) });

    expect((await post(oldToken)).json()['code']).toBe('0000');
    const newToken = addKey(keys, 'new', 'transfer');
    expect(guidgate(['keys', 'remove', 'old', '--keys', keys]).code).toBe(0);
    // Not yet re-read.
    expect((await post(newToken)).status).toBe(401);
    expect((await post(oldToken)).json()['code']).toBe('0000');

    s.child.kill('SIGHUP');
    await waitFor(async () => (await post(newToken)).status === 200, { intervalMs: 50, what: 'the new key to work' });
    expect((await post(oldToken)).status).toBe(401);

    // The line after the file's last (the key and the comment saying when it was made).
    const badLine = readFileSync(keys, 'utf8').split('\n').length;
    appendFileSync(keys, 'just-a-name\n');
    s.child.kill('SIGHUP');
    await waitFor(() => s.output().includes('keys file refused'), { what: 'the refusal in the log' });
    expect(s.output()).toMatch(new RegExp(`line ${badLine}: expected NAME SCOPES HASH`));
    expect((await post(newToken)).json()['code']).toBe('0000');
    expect(s.child.exitCode).toBeNull();

    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    for (const token of [oldToken, newToken]) {
      expect(s.output()).not.toContain(token);
      expect(s.output()).not.toContain(token.slice(3, 20));
    }
    // And none in the ledger (events and projection).
    const history = guidgate(['ledger', '--json', '--db', join(dir, 'l.db')]);
    expect(history.code).toBe(0);
    expect(history.stdout).toContain('"channel":"new"');
    for (const token of [oldToken, newToken]) expect(history.stdout).not.toContain(token);
  });

  it('a bad keys file at start: exit 2 naming the line, nothing listens', async () => {
    const dir = tmp();
    const keys = join(dir, 'keys');
    writeFileSync(keys, '# ops\n\nok read sha256:' + '0'.repeat(64) + '\nbad transfer,superuser sha256:' + '1'.repeat(64) + '\n');
    const s = serve(['--keys', keys, '--db', join(dir, 'l.db')]);
    expect(await s.exited).toBe(2);
    expect(s.output()).toContain('line 4: column 2 (SCOPES): an unknown scope (scope 2 of 2): expected transfer, read, admin');
    expect(s.output()).not.toContain('superuser');
    expect(s.output()).not.toContain('listening');
    expect(existsSync(join(dir, 'l.db'))).toBe(false);
  });

  it('a token pasted into the scopes column (#24): serve exits 2 naming the line, and SIGHUP logs the refusal, never the token', async () => {
    const dir = tmp();
    const keys = join(dir, 'keys');
    const token = addKey(keys, 'shop-a', 'transfer');
    const [name, , hash] = readFileSync(keys, 'utf8').split('\n').find((l) => !l.startsWith('#'))!.split(' ') as [string, string, string];
    const pasted = `# ops\n${name} ${token} ${hash}\n`;
    const notQuoted = (output: string) => {
      for (let at = 0; at + 8 <= token.length; at++) expect(output).not.toContain(token.slice(at, at + 8));
    };

    writeFileSync(keys, pasted);
    const refused = serve(['--keys', keys, '--db', join(dir, 'l.db')]);
    expect(await refused.exited).toBe(2);
    notQuoted(refused.output());
    expect(refused.output()).toContain('line 2: column 2 (SCOPES): an unknown scope (scope 1 of 1): expected transfer, read, admin');
    expect(existsSync(join(dir, 'l.db'))).toBe(false);

    writeFileSync(keys, `${name} transfer ${hash}\n`);
    const sim = await simulator();
    const s = serve(['--keys', keys, '--db', join(dir, 'l.db'), '--account-url', sim.url, '--log-level', 'info']);
    const url = await s.ready;
    writeFileSync(keys, pasted);
    s.child.kill('SIGHUP');
    await waitFor(() => s.output().includes('keys file refused'), { what: 'the refusal in the log' });
    expect(s.output()).toContain('line 2: column 2 (SCOPES)');
    // The old keys stay in force.
    const ok = await httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(transfer()), headers: bearer(token) });
    expect(ok.json()['code']).toBe('0000');
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    notQuoted(s.output());
  });

  it('open mode: refused on a non-loopback host (exit 2), allowed with --insecure-open and a warning', async () => {
    const dir = tmp();
    const refused = serve(['--host', '0.0.0.0', '--db', join(dir, 'l.db')]);
    expect(await refused.exited).toBe(2);
    expect(refused.output()).toContain('--insecure-open');
    expect(existsSync(join(dir, 'l.db'))).toBe(false);

    const open = serve(['--host', '0.0.0.0', '--insecure-open', '--db', join(dir, 'l.db'), '--log-level', 'warn']);
    const url = await open.ready;
    expect(open.output()).toMatch(/warning: serving WITHOUT keys on 0\.0\.0\.0/);
    const r = await httpRequest(`${url.replace('0.0.0.0', '127.0.0.1')}/v1/transfers`, { method: 'POST', body: JSON.stringify(transfer()) });
    expect(r.json()['code']).toBe('0000');
  });

  describe('TLS', () => {
    let pki: Pki;
    // Made once for these tests, removed after the last.
    const pkiDir = useTempDir('file');
    beforeAll(() => {
      pki = makePki(pkiDir());
    });
    const agent = (client?: { cert: string; key: string }) => cleanup.use(new Agent({ connect: { ca: pki.caCert, ...client } }));
    const get = async (url: string, dispatcher: Agent, headers: Record<string, string> = {}) => {
      const res = await request(url, { dispatcher, headers });
      return { status: res.statusCode, body: await res.body.text() };
    };

    it('HTTPS with mutual TLS: a client without a certificate, or with one another CA signed, is refused; one from the CA gets in', async () => {
      const dir = tmp();
      const keys = join(dir, 'keys');
      const token = addKey(keys, 'reader', 'read');
      const s = serve(['--keys', keys, '--db', join(dir, 'l.db'), '--log-level', 'warn', '--tls-cert', pki.paths.serverCert, '--tls-key', pki.paths.serverKey, '--tls-client-ca', pki.paths.caCert]);
      const url = await s.ready;
      expect(url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);

      await expect(get(`${url}/healthz`, agent())).rejects.toThrow();
      await expect(get(`${url}/healthz`, agent({ cert: pki.otherClientCert, key: pki.otherClientKey }))).rejects.toThrow();
      // Plain HTTP to the TLS port gets no answer in contract shape either.
      await expect(httpRequest(`${url.replace('https:', 'http:')}/healthz`, { method: 'GET' })).rejects.toThrow();

      const client = agent({ cert: pki.clientCert, key: pki.clientKey });
      expect((await get(`${url}/healthz`, client)).status).toBe(200);
      // mTLS and keys both apply: a certificate alone does not open the data routes.
      expect((await get(`${url}/metrics`, client)).status).toBe(401);
      expect((await get(`${url}/metrics`, client, bearer(token))).status).toBe(200);
    });

    it('HTTPS without client certificates: any client that trusts the CA gets in', async () => {
      const dir = tmp();
      const s = serve(['--db', join(dir, 'l.db'), '--log-level', 'warn', '--tls-cert', pki.paths.serverCert, '--tls-key', pki.paths.serverKey]);
      const url = await s.ready;
      expect(url.startsWith('https://')).toBe(true);
      expect((await get(`${url}/healthz`, agent())).status).toBe(200);
    });

    it('--tls-cert without --tls-key, or an unreadable one, is bad usage', async () => {
      const dir = tmp();
      const alone = serve(['--db', join(dir, 'l.db'), '--tls-cert', pki.paths.serverCert]);
      expect(await alone.exited).toBe(2);
      const missing = serve(['--db', join(dir, 'l.db'), '--tls-cert', pki.paths.serverCert, '--tls-key', join(dir, 'nope.key')]);
      expect(await missing.exited).toBe(2);
      expect(missing.output()).toContain('--tls-key: cannot read');
    });

    /** A TLS front for the simulator, with the certificate our test CA signed. */
    const tlsAccountSystem = async (sim: Simulator): Promise<string> => {
      const server: TlsServer = createTlsServer({ cert: pki.serverCert, key: pki.serverKey }, (socket) => {
        const upstream = netConnect(sim.port, '127.0.0.1');
        socket.pipe(upstream).pipe(socket);
        const end = () => {
          socket.destroy();
          upstream.destroy();
        };
        socket.on('error', end);
        upstream.on('error', end);
        socket.on('close', end);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      cleanup.add(() => new Promise<void>((r) => server.close(() => r())));
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error('no address');
      return `https://127.0.0.1:${address.port}`;
    };

    it('an https account system is verified against --account-ca; without it the handshake fails: E902, not one call', async () => {
      const dir = tmp();
      const sim = await simulator();
      const accountUrl = await tlsAccountSystem(sim);

      const trusted = serve(['--db', join(dir, 'a.db'), '--account-url', accountUrl, '--account-ca', pki.paths.caCert, '--log-level', 'warn']);
      const url = await trusted.ready;
      const ok = transfer();
      expect((await httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify(ok) })).json()['code']).toBe('0000');
      expect(sim.guidStats(String(ok['guid'])).calls).toBe(1);

      const untrusted = serve(['--db', join(dir, 'b.db'), '--account-url', accountUrl, '--log-level', 'warn']);
      const url2 = await untrusted.ready;
      const refused = transfer();
      const r = await httpRequest(`${url2}/v1/transfers`, { method: 'POST', body: JSON.stringify(refused) });
      expect(r.status).toBe(503);
      expect(r.json()['code']).toBe('E902');
      expect(sim.guidStats(String(refused['guid'])).calls).toBe(0);
      untrusted.child.kill('SIGTERM');
      expect(await untrusted.exited).toBe(0);
      // What classifyFailure made of it: FAILED (refused) with the certificate error, from the connect phase.
      const history = guidgate(['history', String(refused['guid']), '--json', '--db', join(dir, 'b.db')]);
      const events = JSON.parse(history.stdout) as Array<{ type: string; data: { reason?: string; detail?: string } }>;
      const failed = events.find((e) => e.type === 'ConnectFailed');
      expect(failed?.data.reason).toBe('refused');
      expect(failed?.data.detail).toMatch(/^UNABLE_TO_VERIFY_LEAF_SIGNATURE/);

      const badCa = serve(['--db', join(dir, 'c.db'), '--account-ca', pki.paths.caCert]);
      expect(await badCa.exited).toBe(2);
      expect(badCa.output()).toContain('--account-ca needs an https:// --account-url');
    });
  });
});
