/**
 * The peers of `npm run bench:peers` (bench/peers/*Relay.ts) must do guidgate's job, or the side-by-side table
 * compares different work: over real sockets, on a Redis server of the test's own, each forwards a new GUID to the
 * stub account system once, answers with the stub's body, and answers a resend of it with the same body without
 * calling again. The stub itself counts the calls (the benchmark checks its figures with the same count).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { freePort, REPO_ROOT } from '../support/children.js';
import { useCleanup, type Cleanup } from '../support/cleanup.js';
import { waitFor } from '../support/waitFor.js';

const REDIS_SERVER = '/usr/bin/redis-server';
const PEERS = join(REPO_ROOT, 'dist', 'bench', 'peers');

/** Under CI (`CI=true`) a missing Redis server is a failure, never a skip; elsewhere the tests are skipped. */
function redisForTests(): boolean {
  if (existsSync(REDIS_SERVER)) return true;
  if (process.env['CI'] === 'true') throw new Error(`no ${REDIS_SERVER}; CI needs it: apt-get install redis-server`);
  console.warn(`Peer relay tests skipped: no ${REDIS_SERVER}. To run them, apt-get install redis-server.`);
  return false;
}

const stop = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });

/** Starts a child, stopped by `cleanup`, and resolves once it prints `marker` (the match's first group, if any). */
function startChild(cleanup: Cleanup, command: string, args: string[], marker: RegExp): Promise<string> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  cleanup.add(() => stop(child));
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = marker.exec(out);
      if (m) resolve(m[1] ?? m[0]);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${out}`)));
  });
}
const startNode = (cleanup: Cleanup, script: string, args: string[]) =>
  startChild(cleanup, process.execPath, [join(PEERS, script), ...args], /listening on (http:\/\/\S+)/);

describe.skipIf(!redisForTests())('the peer relays of bench:peers', () => {
  const forTheFile = useCleanup('file');
  const forEachTest = useCleanup();
  let redisUrl: string;
  let stubUrl: string;
  const posts = async () => ((await (await fetch(`${stubUrl}/stats`)).json()) as { posts: number }).posts;

  beforeAll(async () => {
    const port = await freePort();
    await startChild(forTheFile, REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], /Ready to accept connections/);
    redisUrl = `redis://127.0.0.1:${port}/0`;
    stubUrl = await startNode(forTheFile, 'stubAccount.js', ['--port', '0']);
  });

  const transfer = (relayUrl: string, guid: string) =>
    fetch(`${relayUrl}/v1/transfers`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': guid },
      body: JSON.stringify({ guid, from: 'ACC-1001', to: 'ACC-2002', amount: 100, currency: 'CNY', note: 'x'.repeat(150) }),
    }).then(async (res) => ({ status: res.status, body: await res.text() }));

  it.each(['powertoolsRelay.js', 'expressIdempotencyRelay.js', 'nodeIdempotencyRelay.js'])(
    '%s forwards a new GUID once and replays its answer to every resend',
    async (script) => {
      const relay = await startNode(forEachTest, script, ['--port', '0', '--account-url', stubUrl, '--redis', redisUrl]);
      const guid = `${script}-a`;
      const before = await posts();

      const first = await transfer(relay, guid);
      expect(first.status).toBe(200);
      expect(JSON.parse(first.body)).toMatchObject({ guid, code: '0000' });
      expect(await posts()).toBe(before + 1);

      // express-idempotency saves the answer just after sending it: a resend before that is refused (409), not sent.
      const resend = await waitFor(async () => {
        const r = await transfer(relay, guid);
        return r.status === 409 ? null : r;
      }, { what: 'a resend answered' });
      expect(resend).toEqual(first);
      expect(await transfer(relay, guid)).toEqual(first);
      expect(await posts()).toBe(before + 1);

      const other = await transfer(relay, `${script}-b`);
      expect(JSON.parse(other.body)).toMatchObject({ guid: `${script}-b`, code: '0000' });
      expect(await posts()).toBe(before + 2);
    },
  );
});
