import http from 'node:http';
import { rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { httpRequest, makeKeys, startHarness, transfer, type Harness } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';

/** An account system whose answers echo the accounts, at the top and nested, as some cores do. */
const answerFor = (guid: string, code: string) =>
  `{"guid":${JSON.stringify(guid)},"code":"${code}","from":"6222021001777","to":"6222021002888","amount":100,"posting":{"legs":[{"from":"6222021001777"},{"to":6222021002888}]}}`;
const MASKED = (guid: string, code: string) =>
  `{"guid":${JSON.stringify(guid)},"code":"${code}","from":"*********1777","to":"*********2888","amount":100,"posting":{"legs":[{"from":"*********1777"},{"to":"*********2888"}]}}`;
const FULL_NUMBERS = /6222021001777|6222021002888/;

/**
 * One masking rule for every view of a stored answer (issue #24): a real `serve` with keys on, a real ledger file,
 * an account system on loopback whose answers carry account numbers.
 */
describe('the views of a row show account numbers masked, one rule for all', () => {
  let h: Harness;
  let dir: string;
  let account: http.Server;
  let tokens: Record<string, string>;
  const tmp = useTempDir('file');
  const cleanup = useCleanup('file');

  beforeAll(async () => {
    dir = tmp();
    account = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        const request = JSON.parse(body) as { guid: string; amount: number };
        res.writeHead(200, { 'content-type': 'application/json' }).end(answerFor(request.guid, request.amount === 1 ? 'B201' : '0000'));
      });
    });
    await new Promise<void>((r) => account.listen(0, '127.0.0.1', r));
    cleanup.add(() => {
      account.closeAllConnections();
      return new Promise((r) => account.close(r));
    });
    const keys = makeKeys(join(dir, 'keys'), { pay: ['transfer'], reader: ['read'] });
    tokens = keys.tokens;
    h = cleanup.use(await startHarness(dir, { relay: { keys: keys.ring, accountUrl: `http://127.0.0.1:${(account.address() as AddressInfo).port}`, settleEveryMs: 0 } }));
  });

  const as = (token: string) => ({ authorization: `Bearer ${tokens[token]!}` });
  const get = (path: string, token: string) => httpRequest(`${h.relay.url}${path}`, { method: 'GET', headers: as(token) });

  it.each([['0000', 100], ['B201', 1]] as const)('GET /v1/transfers/{guid} of a DONE row (%s): the answer is a JSON string with from/to masked at every depth, the rest as stored', async (code, amount) => {
    const t = transfer({ amount });
    const guid = String(t['guid']);
    const posted = await h.post(JSON.stringify(t), as('pay'));
    // The channel's own reply is the answer byte for byte (CONTRACT.md §2): not a view.
    expect([posted.status, posted.body]).toEqual([200, answerFor(guid, code)]);

    for (const key of ['reader', 'pay']) {
      const r = await get(`/v1/transfers/${guid}`, key);
      expect(r.status).toBe(200);
      expect(r.body).not.toMatch(FULL_NUMBERS);
      const row = r.json();
      expect(row).toMatchObject({ guid, status: 'DONE', code });
      expect(typeof row['response']).toBe('string');
      expect(row['response']).toBe(MASKED(guid, code));
    }

    // The timeline shows the same answer, parsed: the same rule.
    const events = (await get(`/v1/transfers/${guid}/events`, 'reader')).json() as { timeline: { kind: string; type?: string; data?: Record<string, unknown> }[] };
    const answered = events.timeline.find((e) => e.type === 'Answered');
    expect(answered?.data?.['response']).toEqual(JSON.parse(MASKED(guid, code)));
  });
});
