import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { openJournalUrl, reconcile, type LedgerRecord } from '../../src/reconcile/index.js';
import { startSimulator, type JournalEntry, type Simulator, type SimulatorOptions } from '../../src/simulator/index.js';
import { memoryLedger } from '../support/reconcile.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';

const tempDir = useTempDir();
const agent = useCleanup('file').use(new Agent({ connections: 16 }));
const cleanup = useCleanup();

const sim = async (opts: SimulatorOptions = {}): Promise<Simulator> => cleanup.use(await startSimulator({ port: 0, ...opts }));

async function get(url: string): Promise<{ status: number; type: string | undefined; text: string }> {
  const res = await request(url, { dispatcher: agent, reset: true });
  return { status: res.statusCode, type: res.headers['content-type'] as string | undefined, text: await res.body.text() };
}
async function post(s: Simulator, body: Record<string, unknown>): Promise<Record<string, unknown> | null> {
  try {
    const res = await request(`${s.url}/transfer`, { method: 'POST', dispatcher: agent, reset: true, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    const text = await res.body.text();
    return res.statusCode === 200 ? (JSON.parse(text) as Record<string, unknown>) : null;
  } catch {
    return null; // a reset connection
  }
}
const transfer = (guid: string, extra: Record<string, unknown> = {}) => ({ guid, from: 'ACC-A', to: 'ACC-B', amount: 250, currency: 'CNY', ...extra });

async function journal(s: Simulator, from: number | string = 0, to: number | string = Date.now() + 60_000): Promise<JournalEntry[]> {
  const r = await get(`${s.url}/journal?from=${from}&to=${to}`);
  expect(r.status).toBe(200);
  expect(r.type).toBe('application/x-ndjson');
  return r.text === '' ? [] : r.text.trimEnd().split('\n').map((l) => JSON.parse(l) as JournalEntry);
}

describe('simulator: GET /journal, one entry per posting (CONTRACT.md §8)', () => {
  it('every POST applied with 0000 is an entry with its own ref; a transfer applied twice has two; rejections have none', async () => {
    const s = await sim({ initialBalance: 1_000 });
    const a1 = await post(s, transfer('twice'));
    const a2 = await post(s, transfer('twice'));
    await post(s, transfer('no-currency', { currency: undefined, amount: 7 }));
    await post(s, transfer('too-much', { amount: 5_000 })); // B201
    await post(s, transfer('no-account', { to: 'X-404' })); // B202
    s.setFaults({ byGuid: { e500: 'e500', garbage: 'garbage' } });
    await post(s, transfer('e500'));
    await post(s, transfer('garbage'));
    const entries = await journal(s);
    expect(entries.map((e) => Object.keys(e))).toEqual(entries.map(() => ['guid', 'ref', 'from', 'to', 'amount', 'currency', 'appliedAt']));
    expect(entries.map(({ guid, ref, from, to, amount, currency }) => ({ guid, ref, from, to, amount, currency }))).toEqual([
      { guid: 'twice', ref: a1!['txId'], from: 'ACC-A', to: 'ACC-B', amount: 250, currency: 'CNY' },
      { guid: 'twice', ref: a2!['txId'], from: 'ACC-A', to: 'ACC-B', amount: 250, currency: 'CNY' },
      { guid: 'no-currency', ref: expect.stringMatching(/^tx-/), from: 'ACC-A', to: 'ACC-B', amount: 7, currency: null },
    ]);
    expect(entries.every((e, i) => Number.isSafeInteger(e.appliedAt) && (i === 0 || e.appliedAt >= entries[i - 1]!.appliedAt))).toBe(true);
  });

  it('a posting applied without an answer (reset) is in the journal; one never applied (hold) is not', async () => {
    const s = await sim();
    s.setFaults({ byGuid: { 'reset-1': 'reset', 'hold-1': 'hold' } });
    expect(await post(s, transfer('reset-1'))).toBeNull();
    const held = request(`${s.url}/transfer`, { method: 'POST', dispatcher: agent, reset: true, body: JSON.stringify(transfer('hold-1')), headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(300) }).catch(() => null);
    await held;
    expect((await journal(s)).map((e) => e.guid)).toEqual(['reset-1']);
  });

  it('from is inclusive and to exclusive, by the time the posting was applied', async () => {
    const s = await sim();
    for (let i = 0; i < 3; i++) await post(s, transfer(`w-${i}`));
    const all = await journal(s);
    const first = all[0]!.appliedAt;
    const last = all[2]!.appliedAt;
    expect((await journal(s, first, last)).map((e) => e.guid)).toEqual(all.filter((e) => e.appliedAt < last).map((e) => e.guid));
    expect((await journal(s, last, last + 1)).map((e) => e.guid)).toEqual(all.filter((e) => e.appliedAt === last).map((e) => e.guid));
    expect(await journal(s, last + 1, last + 1)).toEqual([]);
  });

  it('pages through a long journal in order, every posting once', async () => {
    const s = await sim();
    const guids = Array.from({ length: 2300 }, (_, i) => `p-${String(i).padStart(4, '0')}`);
    for (let i = 0; i < guids.length; i += 50) await Promise.all(guids.slice(i, i + 50).map((g) => post(s, transfer(g))));
    const entries = await journal(s);
    expect(entries).toHaveLength(guids.length);
    expect(new Set(entries.map((e) => e.ref)).size).toBe(guids.length);
    expect([...entries.map((e) => e.guid)].sort()).toEqual(guids);
  });

  it.each([
    ['', 'from', /from is required/],
    ['from=1', 'to', /to is required/],
    ['from=abc&to=5', 'from', /from must be ms since the epoch/],
    ['from=1&to=1.5', 'to', /digits only/],
    ['from=-1&to=5', 'from', /digits only/],
    ['from=1&to=99999999999999999999', 'to', /ms since the epoch/],
    ['from=1&from=2&to=5', 'from', /ms since the epoch/],
    ['from=10&to=5', 'to', /to must not be before from/],
  ])('?%s → 400 with a JSON error naming %s', async (query, field, message) => {
    const s = await sim();
    const r = await get(`${s.url}/journal?${query}`);
    expect(r.status).toBe(400);
    expect(r.type).toMatch(/^application\/json/);
    const body = JSON.parse(r.text) as Record<string, unknown>;
    expect(body).toMatchObject({ code: 'E400', field });
    expect(String(body['message'])).toMatch(message);
  });

  it('a simulator file made before the journal kept its postings: they are served with a null currency', async () => {
    const dbPath = join(tempDir(), 'sim.db');
    const old = new Database(dbPath);
    old.exec(`CREATE TABLE applications (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT NOT NULL, tx_id TEXT NOT NULL,
      from_id TEXT NOT NULL, to_id TEXT NOT NULL, amount INTEGER NOT NULL, at INTEGER NOT NULL)`);
    old.prepare('INSERT INTO applications (guid, tx_id, from_id, to_id, amount, at) VALUES (?, ?, ?, ?, ?, ?)').run('old-1', 'tx-old', 'A', 'B', 5, 1000);
    old.close();
    const s = await sim({ dbPath });
    await post(s, transfer('new-1'));
    const entries = await journal(s);
    expect(entries.map((e) => [e.guid, e.currency])).toEqual([['old-1', null], ['new-1', 'CNY']]);
  });

  it('reconciles: its journal against a ledger, over real HTTP', async () => {
    const s = await sim();
    const started = Date.now() - 1;
    await post(s, transfer('rec-ok'));
    await post(s, transfer('rec-twice'));
    await post(s, transfer('rec-twice'));
    await post(s, transfer('rec-stranger'));
    const request = (guid: string) => JSON.stringify(transfer(guid));
    const records: LedgerRecord[] = ['rec-ok', 'rec-twice', 'rec-never-posted'].map((guid) => ({ guid, status: 'DONE', code: '0000', request: request(guid), firstSentAt: started }));
    const window = { from: started - 1000, to: Date.now() + 1, pendingMs: 0 };
    const verdicts: Record<string, string> = {};
    const summary = await reconcile({
      window,
      journal: await openJournalUrl(s.url, window),
      ledger: memoryLedger(records),
      onBreak: () => {},
      onJudged: (g, v) => void (verdicts[g] = v.category),
      tempDir: tempDir(),
    });
    expect(verdicts).toEqual({ 'rec-ok': 'matched', 'rec-twice': 'duplicate_in_journal', 'rec-stranger': 'missing_in_ledger', 'rec-never-posted': 'missing_in_journal' });
    expect(summary.source).toBe(`${s.url}/journal?from=${window.from}&to=${window.to}`);
  });
});
