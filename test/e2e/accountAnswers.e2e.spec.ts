import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it, expect } from 'vitest';
import { resolveUnknown } from '../../src/commands/resolve.js';
import { openLedger } from '../support/ledgerStore.js';
import { createAccountClient } from '../../src/account/accountClient.js';
import { startHarness, transfer, type Harness } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { orThrow } from '../../src/events/storeResult.js';

/** A loopback account system that answers whatever the test sets, and counts the transfers it receives. */
async function scriptedAccount(): Promise<{ url: string; posts: () => number; answers: { post: [number, string]; inquiry: [number, string] }; close(): Promise<void> }> {
  let posts = 0;
  const answers: { post: [number, string]; inquiry: [number, string] } = { post: [200, '{"code":"0000"}'], inquiry: [404, ''] };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const [status, body] = req.method === 'POST' ? (posts++, answers.post) : answers.inquiry;
      res.writeHead(status, { 'content-type': 'application/json' }).end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    posts: () => posts,
    answers,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

describe('account answers, contract v2 §3 (real sockets: relay, ledger file, a scripted account system)', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  it('an answer giving code twice is not definite (E901, UNKNOWN); an inquiry 404 counts as absent only when its JSON names the GUID', async () => {
    const account = await scriptedAccount();
    cleanup.add(account.close);
    const h: Harness = cleanup.use(await startHarness(tmp(), { relay: { accountUrl: account.url } }));
    const t = transfer();
    const guid = String(t['guid']);

    account.answers.post = [200, '{"code":"B201","message":"insufficient funds","code":"0000"}'];
    const first = await h.post(JSON.stringify(t));
    expect([first.status, first.json()['code']]).toEqual([504, 'E901']);
    expect([(await h.post(JSON.stringify(t))).json()['code'], account.posts()]).toEqual(['E901', 1]);

    const store = openLedger(h.db);
    const client = createAccountClient({ baseUrl: account.url, timeoutMs: 1000 });
    try {
      expect((await orThrow(store.getLedger(guid)))?.status).toBe('UNKNOWN');
      const settle = () => resolveUnknown({ store, account: client }, { minAgeMs: 0, graceMs: 1000 });
      for (const body of ['<html>404 Not Found</html>', '{"code":"E404","message":"no such route"}', JSON.stringify({ guid: `${guid}-other`, code: 'E404' })]) {
        account.answers.inquiry = [404, body];
        expect((await settle()).absent).toBe(0);
        expect((await orThrow(store.getLedger(guid)))?.status).toBe('UNKNOWN');
      }
      account.answers.inquiry = [200, '{"code":"E500","code":"0000"}'];
      expect((await settle()).processed).toBe(0);
      expect((await orThrow(store.getLedger(guid)))?.status).toBe('UNKNOWN');

      account.answers.inquiry = [404, JSON.stringify({ guid, code: 'E404', message: 'no record of this transfer' })];
      expect((await settle()).absent).toBe(1);
      expect((await orThrow(store.getLedger(guid)))?.status).toBe('FAILED');
    } finally {
      await client.close();
      await store.close();
    }
    expect(account.posts()).toBe(1);
  });

  it('an answer about another GUID is not definite: a POST gets E901 (UNKNOWN), an inquiry leaves it UNKNOWN; the answer naming it settles it', async () => {
    const account = await scriptedAccount();
    cleanup.add(account.close);
    const h: Harness = cleanup.use(await startHarness(tmp(), { relay: { accountUrl: account.url } }));
    const t = transfer();
    const guid = String(t['guid']);
    const other = JSON.stringify({ guid: 'SOMEONE-ELSE', code: '0000', message: 'transfer done', txId: 'tx-other' });

    account.answers.post = [200, other];
    const first = await h.post(JSON.stringify(t));
    expect([first.status, first.json()['code']]).toEqual([504, 'E901']);
    expect(first.body).not.toContain('SOMEONE-ELSE');

    const store = openLedger(h.db);
    const client = createAccountClient({ baseUrl: account.url, timeoutMs: 1000 });
    try {
      expect((await orThrow(store.getLedger(guid)))?.status).toBe('UNKNOWN');
      const settle = () => resolveUnknown({ store, account: client }, { minAgeMs: 0, graceMs: 1000 });
      for (const body of [other, `{"guid":"${guid}","code":"0000","guid":"${guid}"}`, JSON.stringify({ guid: null, code: '0000' })]) {
        account.answers.inquiry = [200, body];
        expect((await settle()).processed).toBe(0);
        expect((await orThrow(store.getLedger(guid)))?.status).toBe('UNKNOWN');
      }
      const own = JSON.stringify({ guid, code: '0000', message: 'transfer done', txId: 'tx-own' });
      account.answers.inquiry = [200, own];
      expect((await settle()).processed).toBe(1);
      expect(await orThrow(store.getLedger(guid))).toMatchObject({ status: 'DONE', response: own });
    } finally {
      await client.close();
      await store.close();
    }
    const resend = await h.post(JSON.stringify(t));
    expect([resend.status, resend.body]).toEqual([200, JSON.stringify({ guid, code: '0000', message: 'transfer done', txId: 'tx-own' })]);
    expect(account.posts()).toBe(1);
  });
});
