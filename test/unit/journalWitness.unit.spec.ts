import * as E from 'fp-ts/lib/Either.js';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventStore } from '../../src/events/store.js';
import { judgeByJournal, type WitnessDeps } from '../../src/wiring/journalWitness.js';

/** A journal served over HTTP as the account system does (CONTRACT.md §8), and a ledger that knows some GUIDs. */
describe('the journal witness at start (serve --journal-witness)', () => {
  let server: Server | null = null;
  afterEach(async () => {
    await new Promise<void>((r) => (server === null ? r() : server.close(() => r())));
    server = null;
  });
  async function journal(lines: string[]): Promise<{ url: string; asked: string[] }> {
    const asked: string[] = [];
    server = createServer((req, res) => {
      asked.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.end(lines.join('\n') + '\n');
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, asked };
  }
  const posting = (guid: string, appliedAt: number) => JSON.stringify({ guid, ref: `r-${guid}`, from: 'a', to: 'b', amount: 100, currency: 'CNY', appliedAt });
  function deps(url: string, known: string[], newestAt: number | null) {
    const calls = { wentBack: [] as { why: string; seen: Record<string, unknown> }[], failed: 0, warn: [] as string[] };
    const store = {
      queryLedger: async () => E.right(newestAt === null ? [] : [{ updatedAt: newestAt }]),
      getLedger: async (g: string) => E.right(known.includes(g) ? { guid: g } : null),
    } as unknown as EventStore;
    const d: WitnessDeps = {
      store, accountUrl: url, marginMs: 35_000, clock: () => 1_000_000,
      log: { info: () => {}, warn: (_l, m) => calls.warn.push(m) },
      wentBack: async (why, seen) => {
        calls.wentBack.push({ why, seen });
        return E.right(undefined);
      },
      failed: () => calls.failed++,
    };
    return { d, calls };
  }

  it('exclusive: postings of GUIDs the ledger does not know → the guard is told once, with how many and the first ones; read from the newest event less the margin', async () => {
    const j = await journal([posting('g-known', 900_000), posting('g-lost-1', 950_000), posting('g-lost-2', 960_000), posting('g-lost-1', 961_000)]);
    const { d, calls } = deps(j.url, ['g-known'], 900_000);
    const said = await judgeByJournal('exclusive', d);
    expect(j.asked).toEqual(['/journal?from=865000&to=1000001']);
    expect(calls.wentBack).toHaveLength(1);
    expect(calls.wentBack[0]!.why).toMatch(/journal shows 2 posting GUID\(s\) the ledger does not know/);
    expect(calls.wentBack[0]!.seen).toMatchObject({ unknownGuids: 2, firstUnknown: ['g-lost-1', 'g-lost-2'], postings: 4, guids: 3 });
    expect(said).toMatch(/^journal witness: exclusive .*2 posting GUID\(s\) the ledger does not know/);
  });

  it('exclusive: every GUID known → nothing opened, said so', async () => {
    const j = await journal([posting('g-1', 900_000)]);
    const { d, calls } = deps(j.url, ['g-1'], 900_000);
    expect(await judgeByJournal('exclusive', d)).toMatch(/every GUID of its 1 postings is in the ledger/);
    expect(calls.wentBack).toEqual([]);
  });

  it('exclusive: a journal that cannot be read → a warning and a count, start goes on, nothing opened', async () => {
    const j = await journal(['not json']);
    const { d, calls } = deps(j.url, [], null);
    expect(await judgeByJournal('exclusive', d)).toMatch(/could not be read or judged/);
    expect(calls).toMatchObject({ wentBack: [], failed: 1 });
    expect(calls.warn[0]).toMatch(/judged by the continuity guard alone/);
    const gone = deps('http://127.0.0.1:1', [], null);
    await judgeByJournal('exclusive', gone.d);
    expect(gone.calls.failed).toBe(1);
  });

  it('shared and off: the journal is not read; shared says the journal answers per GUID', async () => {
    const j = await journal([posting('g-lost', 950_000)]);
    const { d, calls } = deps(j.url, [], 900_000);
    expect(await judgeByJournal('shared', d)).toMatch(/the journal answers per GUID: the inquiry before each first send in a window/);
    expect(await judgeByJournal('off', d)).toMatch(/journal witness: off/);
    expect(j.asked).toEqual([]);
    expect(calls.wentBack).toEqual([]);
  });
});
