/**
 * The operator commands as library calls (src/commands), on a real ledger file, against the real simulator
 * (and the real relay where a channel takes part), over loopback sockets.
 */
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { describe, it, expect } from 'vitest';
import type { SqliteEventStore } from '../../src/store/sqlite/sqliteStore.js';
import { openLedger } from '../support/ledgerStore.js';
import { createAccountClient, type AccountClient } from '../../src/account/accountClient.js';
import { purgeDone } from '../../src/commands/purge.js';
import { reprocessExitCode, reprocessFailed } from '../../src/commands/reprocess.js';
import { resolveExitCode, resolveUnknown } from '../../src/commands/resolve.js';
import { ledgerStats } from '../../src/commands/stats.js';
import { listLedger } from '../../src/commands/ledger.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { countingAccount, seedRow, snapshot, transferBody } from '../support/commandsSeed.js';
import { startHarness, type Harness } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { sleep } from '../support/waitFor.js';
import { orThrow } from '../../src/events/storeResult.js';
import { refusingStore } from '../support/storeResult.js';

const LONG_AGO = Date.UTC(2020, 0, 1);

describe('operator commands as library functions', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const { use } = cleanup;
  const store = (path: string, clock?: () => number): SqliteEventStore => use(openLedger(path, { ...(clock ? { clock } : {}) }));
  const client = (url: string, timeoutMs = 2000): AccountClient => use(createAccountClient({ baseUrl: url, timeoutMs }));
  const harness = async (...args: Parameters<typeof startHarness>): Promise<Harness> => use(await startHarness(...args));
  const simulator = async (opts: Parameters<typeof startSimulator>[0] = {}): Promise<Simulator> => use(await startSimulator({ port: 0, ...opts }));
  /** A server on loopback whose `handle` decides each inquiry; returns its base URL. */
  const server = async (handle: Parameters<typeof createServer>[1]): Promise<string> => {
    const srv: Server = createServer(handle);
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    cleanup.add(() => new Promise((r) => { srv.closeAllConnections(); srv.close(r); }));
    return `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
  };
  /** A port nothing listens on (connections refused). */
  const refusedUrl = async (): Promise<string> => {
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as { port: number }).port;
    await new Promise((r) => srv.close(r));
    return `http://127.0.0.1:${port}`;
  };

  it('the min-age trap: an inquiry younger than the processing time says 404; --min-age above it waits, then finds the answer', async () => {
    // The account system applies at once, answers only after 10 s (the relay gives up after 300 ms: E901, UNKNOWN),
    // and its inquiry keeps saying 404 for 1.5 s after applying.
    const h = await harness(tmp(), { sim: { faults: { mode: 'late-answer', lateMs: 10_000, processingMs: 1500 } }, relay: { timeoutMs: 300 } });
    const a = transferBody('TRAP-A');
    const b = transferBody('TRAP-B');
    const [ra, rb] = await Promise.all([h.post(a.body), h.post(b.body)]);
    expect([ra.json()['code'], rb.json()['code']]).toEqual(['E901', 'E901']);
    expect([h.sim.guidStats('TRAP-A').applied, h.sim.guidStats('TRAP-B').applied]).toEqual([1, 1]);
    const appliedBy = Date.now(); // both were applied before the relay gave up on them
    const ledger = store(h.db);
    const sentB = (await orThrow(ledger.getLedger('TRAP-B')))!.sentAt!;
    // The min-age an operator should choose: the processing time plus the time a request takes to arrive after
    // its Sent is durable (small here, more on a loaded machine), plus a margin.
    const minAgeMs = Math.max(1700, appliedBy - sentB + 1600);
    const account = countingAccount(client(h.sim.url));

    // The trap, shown on A: a min-age below the processing time inquires too early and gets 404 → FAILED. A
    // reprocess of that FAILED row no longer sends it (CONTRACT.md §7): its last Sent is younger than reprocess's
    // own --min-age (default 60 s), so it is held, nothing sent.
    const early = await resolveUnknown({ store: ledger, account: account.client }, { minAgeMs: 100, graceMs: 1000, limit: 1 });
    expect(early).toMatchObject({ candidates: 1, absent: 1, processed: 0 });
    expect((await orThrow(ledger.getLedger('TRAP-A')))).toMatchObject({ status: 'FAILED', failedByInquiry: true });
    h.sim.setFaults({ mode: 'answer' });
    const held = await reprocessFailed({ store: ledger, account: account.client }, { maxAttempts: 3, timeoutMs: 2000 });
    expect(held).toMatchObject({ candidates: 1, held: 1, done: 0 });
    expect(h.sim.guidStats('TRAP-A').applied).toBe(1);

    // B, with a min-age above the processing time: while it is young nothing is even asked.
    const young = await resolveUnknown({ store: ledger, account: account.client }, { minAgeMs, graceMs: 1000 });
    expect(young).toMatchObject({ candidates: 0, processed: 0, absent: 0, stillUnknown: 0 });
    expect(account.inquiries.get('TRAP-B')).toBeUndefined();
    expect((await orThrow(ledger.getLedger('TRAP-B')))?.status).toBe('UNKNOWN');

    // Once it is old enough (the point: B's last Sent must pass --min-age): processed, DONE, with the account
    // system's answer byte for byte.
    await sleep(Math.max(0, sentB + minAgeMs + 50 - Date.now()));
    const old = await resolveUnknown({ store: ledger, account: account.client }, { minAgeMs, graceMs: 1000 });
    expect(old).toMatchObject({ candidates: 1, processed: 1, absent: 0, stillUnknown: 0 });
    expect(account.inquiries.get('TRAP-B')).toBe(1);
    const answer = await (await fetch(`${h.sim.url}/transfer/TRAP-B`)).text();
    const row = await orThrow(ledger.getLedger('TRAP-B'));
    expect(row).toMatchObject({ status: 'DONE', code: '0000', response: answer });
    expect((await orThrow(ledger.readStream('TRAP-B'))).at(-1)).toMatchObject({ type: 'Resolved', data: { source: 'inquiry', outcome: 'processed', response: answer } });
    // The channel's next resend gets that answer replayed; the account system saw B once.
    const resend = await h.post(b.body);
    expect([resend.status, resend.body, resend.headers['idempotent-replayed']]).toEqual([200, answer, 'true']);
    expect(h.sim.guidStats('TRAP-B')).toMatchObject({ calls: 1, applied: 1 });
  });

  it('a channel resend and reprocess racing for the same FAILED GUID, 100 times: exactly one send each time', async () => {
    const h = await harness(tmp(), { relay: { maxAttempts: 3 } });
    const ledger = store(h.db); // a second connection to the file the relay writes
    const account = client(h.sim.url);
    const wins = { relay: 0, reprocess: 0 };
    for (let i = 0; i < 100; i++) {
      const guid = `RACE-${i}`;
      const t = transferBody(guid);
      await seedRow(ledger, guid, 'FAILED', t);
      // Either side gets a random head start: the relay's path is an HTTP round trip and one commit, reprocess's a
      // page read, a lease and then its commit, each commit waiting for the disk off the event loop, so reprocess
      // gets the longer one (up to 8 ms) to win about as often. The head start is time on purpose: sleep.
      const lead = Math.random() * 12 - 8; // > 0: reprocess waits this long; < 0: the relay does
      const [reply, summary] = await Promise.all([
        sleep(Math.max(0, -lead)).then(() => h.post(t.body)),
        sleep(Math.max(0, lead)).then(() => reprocessFailed({ store: ledger, account }, { maxAttempts: 3, timeoutMs: 2000, concurrency: 4 })),
      ]);
      const relaySent = reply.json()['code'] === '0000' && reply.headers['idempotent-replayed'] === undefined;
      expect(['0000', 'E903']).toContain(reply.json()['code']);
      expect((relaySent ? 1 : 0) + summary.done).toBe(1);
      expect(summary.done + summary.skipped).toBe(summary.candidates);
      expect(h.sim.guidStats(guid)).toMatchObject({ calls: 1, applied: 1 });
      expect(await orThrow(ledger.getLedger(guid))).toMatchObject({ status: 'DONE', attempts: 2 });
      if (relaySent) wins.relay++;
      else wins.reprocess++;
    }
    expect(h.sim.stats().doubleApplied).toEqual([]);
    expect(wins.relay + wins.reprocess).toBe(100);
    // Both sides won some: the race was real, not one side always first.
    expect(Math.min(wins.relay, wins.reprocess)).toBeGreaterThan(0);
  });

  it('resolve drops an answer about an older attempt: the row moved on while it was being asked about', async () => {
    const sim = await simulator();
    const db = join(tmp(), 'l.db');
    const old = store(db, () => LONG_AGO);
    await seedRow(old, 'MOVED-1', 'UNKNOWN');
    const ledger = store(db);
    // While the inquiry (which will say 404) is on the wire, someone else settles the row, sends it again, and that
    // attempt times out: the row is a young UNKNOWN at attempt 2, which a stale 404 must not make FAILED.
    const account = countingAccount(client(sim.url), async (guid) => {
      const failed = await orThrow(ledger.execute(guid, { type: 'Resolve', outcome: 'absent' }));
      const seq = failed.kind === 'applied' ? failed.state.lastSeq : -1;
      await orThrow(ledger.execute(guid, { type: 'Send', timeoutMs: 1000, maxAttempts: 5, minAgeMs: 0, inquiry: { seq, at: Date.now(), answer: { kind: 'absent' } } }));
      await orThrow(ledger.execute(guid, { type: 'RecordTimeout', attempt: 2, reason: 'timeout' }));
    });
    const s = await resolveUnknown({ store: ledger, account: account.client }, { minAgeMs: 60_000, graceMs: 1000 });
    expect(s).toMatchObject({ candidates: 1, absent: 0, processed: 0, skipped: 1 });
    expect(await orThrow(ledger.getLedger('MOVED-1'))).toMatchObject({ status: 'UNKNOWN', attempts: 2 });
    expect(resolveExitCode(s)).toBe(0);
  });

  it('a ledger failure in resolve and reprocess is counted and its code and cause kept in the summary (the first one)', async () => {
    const sim = await simulator();
    const db = join(tmp(), 'l.db');
    const old = store(db, () => LONG_AGO);
    await seedRow(old, 'LF-U', 'UNKNOWN');
    await seedRow(old, 'LF-F', 'FAILED');
    const ledger = store(db);
    // Reads work; every write is refused, as by a disk that filled up.
    const refusing = refusingStore(ledger, (m) => ['appendEvents', 'execute', 'leaseRows'].includes(m), 'database or disk is full');
    const r = await resolveUnknown({ store: refusing, account: client(sim.url) }, { minAgeMs: 60_000, graceMs: 5000 });
    expect(r).toMatchObject({ ledgerErrors: 1, ledgerError: 'LEDGER_UNAVAILABLE: database or disk is full', processed: 0 });
    expect(resolveExitCode(r)).toBe(1);
    const p = await reprocessFailed({ store: refusing, account: client(sim.url) }, { maxAttempts: 3, timeoutMs: 1000, minAgeMs: 0 });
    expect(p).toMatchObject({ ledgerErrors: 1, ledgerError: 'LEDGER_UNAVAILABLE: database or disk is full', done: 0 });
    expect(sim.stats().totalCalls).toBe(0);
  });

  it('resolve sweeps orphans first; unknown answers leave rows UNKNOWN; absent → FAILED', async () => {
    const sim = await simulator();
    const db = join(tmp(), 'l.db');
    const old = store(db, () => LONG_AGO);
    await seedRow(old, 'ORPH-R', 'RECEIVED');
    await seedRow(old, 'ORPH-S', 'SENT');
    await seedRow(old, 'GONE-1', 'UNKNOWN');
    const actor = { by: 'resolve', host: 'host-r', pid: 7 };
    const ledger = use(openLedger(db, { actor }));
    const s = await resolveUnknown({ store: ledger, account: client(sim.url) }, { minAgeMs: 60_000, graceMs: 5000 });
    // ORPH-S became UNKNOWN (orphaned) and, being old, was asked about too; the simulator never saw either.
    expect(s).toMatchObject({ swept: { neverSent: 1, orphaned: 1 }, candidates: 2, absent: 2, processed: 0, stillUnknown: 0, ledgerErrors: 0, dryRun: false });
    expect((await orThrow(ledger.getLedger('ORPH-R')))?.status).toBe('FAILED');
    expect((await orThrow(ledger.getLedger('ORPH-S')))?.status).toBe('FAILED');
    expect((await orThrow(ledger.getLedger('GONE-1')))?.status).toBe('FAILED');
    // The audit trail: the sweep's events carry its grace, the inquiry's the min-age and the HTTP status that decided it.
    expect((await orThrow(ledger.readStream('ORPH-S'))).slice(-2).map((e) => [e.type, e.actor])).toEqual([
      ['TimedOut', { ...actor, params: { graceMs: 5000 } }],
      ['Resolved', { ...actor, params: { minAgeMs: 60_000, inquiryStatus: 404 } }],
    ]);
  });

  it('exit rules: 1 when no inquiry reached the account system; 0 when some did, even if they gave no answer', async () => {
    const db = join(tmp(), 'l.db');
    const old = store(db, () => LONG_AGO);
    for (const g of ['R-1', 'R-2', 'N-1']) await seedRow(old, g, 'UNKNOWN');
    const ledger = store(db);

    const down = await resolveUnknown({ store: ledger, account: client(await refusedUrl()) }, { minAgeMs: 1000, graceMs: 1000 });
    expect(down).toMatchObject({ candidates: 3, stillUnknown: 3, unreachable: 3 });
    expect(resolveExitCode(down)).toBe(1);

    // HTTP 500 for every inquiry: reached, but no usable answer. The rows stay UNKNOWN; the run completed.
    const broken = await server((_req, res) => res.writeHead(500).end('{"code":"E999"}'));
    const s500 = await resolveUnknown({ store: ledger, account: client(broken) }, { minAgeMs: 1000, graceMs: 1000 });
    expect(s500).toMatchObject({ candidates: 3, stillUnknown: 3, unreachable: 0 });
    expect(resolveExitCode(s500)).toBe(0);

    // Some connections reset, one 404 naming its GUID (contract v2 §3): completed, exit 0, the summary counts the failures.
    const flaky = await server((req, res) => (req.url?.includes('/R-') ? req.socket.destroy() : res.writeHead(404).end('{"guid":"N-1"}')));
    const mixed = await resolveUnknown({ store: ledger, account: client(flaky) }, { minAgeMs: 1000, graceMs: 1000, concurrency: 1 });
    expect(mixed).toMatchObject({ candidates: 3, absent: 1, stillUnknown: 2, unreachable: 2 });
    expect(resolveExitCode(mixed)).toBe(0);
    expect(await orThrow(ledger.getLedger('R-1'))).toMatchObject({ status: 'UNKNOWN' });
    expect(await orThrow(ledger.getLedger('N-1'))).toMatchObject({ status: 'FAILED' });

    // reprocess against nothing: every send refused again → exit 1, attempts counted. N-1 became FAILED by an
    // inquiry, so it is asked about first; nothing answers: held, not sent (CONTRACT.md §7).
    await seedRow(old, 'C-1', 'FAILED');
    const r = await reprocessFailed({ store: ledger, account: client(await refusedUrl()) }, { maxAttempts: 5, timeoutMs: 1000, minAgeMs: 0 });
    expect(r).toMatchObject({ candidates: 2, failed: 1, held: 1, done: 0, unknown: 0 });
    expect(reprocessExitCode(r)).toBe(1);
    expect(await orThrow(ledger.getLedger('C-1'))).toMatchObject({ status: 'FAILED', attempts: 2 });
    expect(await orThrow(ledger.getLedger('N-1'))).toMatchObject({ status: 'FAILED', attempts: 1 });
  });

  it('reprocess sends only FAILED rows under the cap, their stored bytes; every other state is left alone', async () => {
    const sim = await simulator();
    const db = join(tmp(), 'l.db');
    const old = store(db, () => LONG_AGO);
    const stored = transferBody('F-UNDER', { memo: 'kept  as   sent', extra: [1, 2] });
    await seedRow(old, 'F-UNDER', 'FAILED', { attempts: 2, ...stored });
    await seedRow(old, 'F-CAP', 'FAILED', { attempts: 3 });
    for (const status of ['RECEIVED', 'SENT', 'DONE', 'UNKNOWN', 'PURGED'] as const) await seedRow(old, `S-${status}`, status);
    const before = snapshot(db);
    const account = countingAccount(client(sim.url));
    const s = await reprocessFailed({ store: store(db), account: account.client }, { maxAttempts: 3, timeoutMs: 2000 });
    expect(s).toEqual({ candidates: 1, done: 1, failed: 0, unknown: 0, skipped: 0, found: 0, held: 0, withheld: 0, ledgerErrors: 0, dryRun: false });
    expect(account.transfers).toEqual([stored.body]);
    expect(sim.stats().calls).toEqual({ 'F-UNDER': 1 });
    const after = snapshot(db);
    const others = (snap: typeof before) => ({
      ledger: snap.ledger.filter((r) => (r as { guid: string }).guid !== 'F-UNDER'),
      events: snap.events.filter((r) => (r as { guid: string }).guid !== 'F-UNDER'),
    });
    expect(others(after)).toEqual(others(before));
    expect(await orThrow(store(db).getLedger('F-UNDER'))).toMatchObject({ status: 'DONE', attempts: 3 });
  });

  it('purge never touches an unresolved row, however old; DONE rows become tombstones without their bytes', async () => {
    const db = join(tmp(), 'l.db');
    const old = store(db, () => LONG_AGO);
    for (const status of ['RECEIVED', 'SENT', 'UNKNOWN', 'FAILED', 'DONE'] as const) await seedRow(old, `P-${status}`, status);
    await seedRow(store(db), 'P-DONE-YOUNG', 'DONE');
    const before = snapshot(db);
    const ledger = store(db);
    const s = await purgeDone({ store: ledger }, { retentionMs: 86_400_000, tombstoneRetentionMs: 90 * 86_400_000 });
    expect(s).toMatchObject({ candidates: 1, purged: 1, tombstonesRemoved: 0, dryRun: false });
    expect(s.bytesBefore).toBeGreaterThan(0);
    expect(s.bytesAfter).toBeGreaterThan(0);
    const after = snapshot(db);
    const untouched = (snap: typeof before) => ({
      ledger: snap.ledger.filter((r) => (r as { guid: string }).guid !== 'P-DONE'),
      events: snap.events.filter((r) => (r as { guid: string }).guid !== 'P-DONE'),
    });
    expect(untouched(after)).toEqual(untouched(before));
    expect(await orThrow(ledger.getLedger('P-DONE'))).toMatchObject({ status: 'PURGED', code: '0000', request: null, response: null });
    // The events that carried the request and the answer keep their place with those fields emptied.
    const purgedStream = await orThrow(ledger.readStream('P-DONE'));
    expect(purgedStream.filter((e) => 'request' in e.data).map((e) => [e.type, (e.data as Record<string, unknown>)['request']])).toEqual([['Claimed', null]]);
    expect(purgedStream.filter((e) => 'response' in e.data).map((e) => [e.type, (e.data as Record<string, unknown>)['response']])).toEqual([['Answered', null]]);
    // Later, past the tombstone retention, the tombstone and its events go too.
    const later = await purgeDone({ store: ledger, clock: () => Date.now() + 2000 }, { retentionMs: 86_400_000, tombstoneRetentionMs: 1000 });
    expect(later).toMatchObject({ purged: 0, tombstonesRemoved: 1 });
    expect(await orThrow(ledger.getLedger('P-DONE'))).toBeNull();
    expect(await orThrow(ledger.readStream('P-DONE'))).toEqual([]);
    expect((await orThrow(ledger.countByStatus())).DONE.count).toBe(1);
  });

  it('dry runs change nothing, inquire nothing and send nothing, and report what they would do', async () => {
    const sim = await simulator();
    const db = join(tmp(), 'l.db');
    const old = store(db, () => LONG_AGO);
    await seedRow(old, 'D-RECEIVED', 'RECEIVED');
    await seedRow(old, 'D-SENT', 'SENT');
    await seedRow(old, 'D-UNKNOWN', 'UNKNOWN');
    await seedRow(old, 'D-FAILED', 'FAILED');
    await seedRow(old, 'D-DONE', 'DONE');
    await seedRow(old, 'D-PURGED', 'PURGED');
    const ledger = store(db);
    const before = snapshot(db);
    const account = countingAccount(client(sim.url));
    const listed: string[] = [];
    const r = await resolveUnknown({ store: ledger, account: account.client }, { minAgeMs: 1000, graceMs: 1000, dryRun: true, onRow: (row) => listed.push(row.guid) });
    expect(r).toEqual({
      swept: { neverSent: 1, orphaned: 1 }, candidates: 1, processed: 0, absent: 0, stillUnknown: 0, skipped: 0, unreachable: 0, ledgerErrors: 0, dryRun: true,
      tooYoung: { count: 0, firstEligibleAt: null, firstEligibleInMs: null },
    });
    expect(listed).toEqual(['D-UNKNOWN']);
    const p = await reprocessFailed({ store: ledger, account: account.client }, { maxAttempts: 5, timeoutMs: 1000, dryRun: true });
    expect(p).toEqual({ candidates: 1, done: 0, failed: 0, unknown: 0, skipped: 0, found: 0, held: 0, withheld: 0, ledgerErrors: 0, dryRun: true });
    const g = await purgeDone({ store: ledger }, { retentionMs: 1000, tombstoneRetentionMs: 1000, dryRun: true });
    expect(g).toMatchObject({ candidates: 1, purged: 0, tombstonesRemoved: 1, dryRun: true });
    expect(g.bytesAfter).toBe(g.bytesBefore);
    expect(account.totalInquiries()).toBe(0);
    expect(account.transfers).toEqual([]);
    expect(sim.stats().totalCalls).toBe(0);
    expect(snapshot(db)).toEqual(before);
  });

  it('stats and ledger listing: counts, oldest rows, dead letters, filters', async () => {
    const db = join(tmp(), 'l.db');
    const old = store(db, () => LONG_AGO);
    await seedRow(old, 'L-U', 'UNKNOWN');
    await seedRow(old, 'L-F1', 'FAILED', { attempts: 1 });
    await seedRow(old, 'L-F5', 'FAILED', { attempts: 5 });
    const ledger = store(db);
    await seedRow(ledger, 'L-D', 'DONE');
    const now = Date.now();
    const s = await orThrow(ledgerStats(ledger, { maxAttempts: 5, clock: () => now }));
    expect(s.rows).toEqual({ RECEIVED: 0, SENT: 0, DONE: 1, UNKNOWN: 1, FAILED: 2, PURGED: 0 });
    expect(s.total).toBe(4);
    expect(s.oldest.UNKNOWN).toEqual({ updatedAt: LONG_AGO, ageMs: now - LONG_AGO });
    expect(s.oldest.FAILED?.updatedAt).toBe(LONG_AGO);
    expect(s.deadLetters).toEqual({ maxAttempts: 5, count: 1 });
    const collect = async (it: AsyncIterable<{ guid: string }>) => {
      const out: string[] = [];
      for await (const r of it) out.push(r.guid);
      return out;
    };
    expect(await collect(listLedger(ledger, { statuses: ['FAILED'] }))).toEqual(['L-F1', 'L-F5']);
    expect(await collect(listLedger(ledger, { olderThanMs: 86_400_000 }))).toEqual(['L-F1', 'L-F5', 'L-U']);
    expect(await collect(listLedger(ledger, { limit: 2 }))).toEqual(['L-D', 'L-F1']);
  });
});
