/**
 * The store contract (src/events/store.ts) as tests, written once. Every store runs it by passing a factory:
 * `describeStoreContract('SQLite', sqliteFactory)`; a PostgreSQL factory creates and drops a database.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { ProcessActor } from '../../src/events/codecs.js';
import type { Command } from '../../src/events/decide.js';
import * as E from 'fp-ts/lib/Either.js';
import type { EventStore, LedgerQuery } from '../../src/events/store.js';
import type { OpenStoreOptions } from '../../src/store/openStore.js';
import { childScript, claimRace, spawnNode, waitForLine } from '../support/children.js';
import { orThrow } from '../../src/events/storeResult.js';
import { expectLeft } from '../support/storeResult.js';
import { sleep } from '../support/waitFor.js';
import { runOver, sentRecord } from '../support/reconcile.js';
import { useTempDir } from '../support/tmp.js';
import type { ReconcileResult } from '../../src/reconcile/types.js';

/**
 * Changes made behind the store's back, the way a bug, an operator or another program could: the only
 * way to show that the store notices (or survives) them. Each store implements them in its own terms.
 */
export interface StoreBackdoor {
  /** The projection row says `lastSeq` although the log holds more: a projection behind the log. */
  setProjectionSeq(guid: string, lastSeq: number): Promise<void>;
  setProjectionStatus(guid: string, status: string, code: string | null): Promise<void>;
  deleteProjectionRow(guid: string): Promise<void>;
  /** An event written straight into the log, with no projection row; `actor`: its JSON text in the event, as written before the actors table. */
  insertEvent(guid: string, seq: number, type: string, data: string, actor?: string): Promise<void>;
  /** How many actors the `actors` table keeps, and how many events hold an actor's text themselves. */
  actorsStored(): Promise<{ actors: number; eventsWithText: number }>;
  /** Every event's data of `guid` as stored, joined: what an auditor with the file would read. */
  rawEventData(guid: string): Promise<string>;
  /** From now on the store itself fails when it writes the projection row of `guid` (a failure mid-unit). */
  failProjectionWritesOf(guid: string): Promise<void>;
  /**
   * Another session takes a write lock and holds it until the function returned is called: on `guid`'s row, or on
   * the whole ledger when no GUID is given (a SQLite file has only the one lock: it is taken either way).
   */
  lock(guid?: string): Promise<() => Promise<void>>;
  /** The (closed) ledger marked as written by a newer guidgate, as far as its schema version says. */
  markSchemaNewer(): Promise<void>;
}

/** What a test may choose when it opens a store; the rest is the store's default. */
export type ContractOpenOptions = Pick<OpenStoreOptions, 'clock' | 'actor' | 'busyTimeoutMs' | 'claimDeadlineMs'>;

export interface StoreFixture {
  /** The `--db` value of this ledger: child processes open it with `openStore`. */
  readonly db: string;
  /** Opens (again) the same ledger. Every store opened here is closed by the suite. */
  open(options?: ContractOpenOptions): Promise<EventStore>;
  readonly backdoor: StoreBackdoor;
}

/** Makes a fresh, empty ledger per test, and removes it afterwards (async: a server may create a database). */
export interface StoreFactory {
  create(): Promise<StoreFixture>;
  dispose(fixture: StoreFixture): Promise<void>;
}

const submit = (fp = 'fp', request = '{"guid":"g"}'): Command => ({ type: 'Submit', request, fingerprint: fp, timeoutMs: 3000, maxAttempts: 3 });
const sent = (at: number) => ({ type: 'Sent' as const, at, data: { attempt: 1, timeoutMs: 1 } });
const claimed = (at: number, request = 'r', fingerprint = 'f') => ({ type: 'Claimed' as const, at, data: { request, fingerprint } });
const answer = (response = '{"code":"0000"}', attempt = 1): Command => ({ type: 'RecordAnswer', attempt, code: '0000', response, latencyMs: 3 });


export function describeStoreContract(name: string, factory: StoreFactory): void {
  describe(`store contract: ${name}`, () => {
    let fixture: StoreFixture | undefined;
    const stores: EventStore[] = [];

    afterEach(async () => {
      while (stores.length) await stores.pop()!.close();
      if (fixture !== undefined) await factory.dispose(fixture);
      fixture = undefined;
    });

    const fresh = async (): Promise<StoreFixture> => (fixture = await factory.create());
    const open = async (f: StoreFixture, options?: ContractOpenOptions): Promise<EventStore> => {
      const store = await f.open(options);
      stores.push(store);
      return store;
    };

    describe('event log: claim and compare-and-set', () => {
      it('the claim is one append: of 50 concurrent Submits of one GUID exactly one wins, the others see it exists', async () => {
        const store = await open(await fresh());
        const results = await Promise.all(Array.from({ length: 50 }, () => orThrow(store.execute('g', submit()))));
        expect(results.filter((r) => r.kind === 'applied')).toHaveLength(1);
        expect(results.filter((r) => r.kind === 'refused' && r.refusal.reason === 'exists')).toHaveLength(49);
        expect((await orThrow(store.readStream('g'))).map((e) => [e.seq, e.type])).toEqual([[0, 'Claimed'], [1, 'Sent']]);
      });

      it('processes racing to claim the same GUIDs, one claim at a time or several in flight: each GUID is claimed by exactly one of them', async () => {
        const f = await fresh();
        // Set up the ledger first, so that the children race on claims, not on creating it.
        await (await open(f)).close();
        stores.length = 0;
        const count = 600;
        // Two claim one GUID per transaction; two have eight claims in flight, which also share the store's batches.
        const won = await claimRace('claimer', [1, 2, 3, 4].map((seed) => [f.db, String(count), String(seed * 7919), seed <= 2 ? '1' : '8']));
        const all = won.flat();
        expect(all).toHaveLength(count);
        expect(new Set(all).size).toBe(count);
        // The race was real: more than one process won something.
        expect(won.filter((w) => w.length > 0).length).toBeGreaterThan(1);
        const store = await open(f);
        const log = await orThrow(store.readAll(-1, 10 * count));
        expect(log.filter((e) => e.type === 'Claimed')).toHaveLength(count);
        expect(log.filter((e) => e.type === 'Sent')).toHaveLength(count);
        expect(await orThrow(store.verifyProjection())).toEqual([]);
      }, 120_000);

      it('two stores opened on one ledger, racing for the same GUIDs: each GUID is claimed once, the other store told it exists', async () => {
        const f = await fresh();
        const [a, b] = await Promise.all([open(f), open(f)]);
        const guids = Array.from({ length: 100 }, (_, i) => `g${i}`);
        const results = await Promise.all(guids.flatMap((g) => [orThrow(a.execute(g, submit(g))), orThrow(b.execute(g, submit(g)))]));
        expect(results.filter((r) => r.kind === 'applied')).toHaveLength(100);
        expect(results.filter((r) => r.kind === 'refused' && r.refusal.reason === 'exists')).toHaveLength(100);
        expect(await orThrow(a.countLedger({ statuses: ['SENT'] }))).toBe(100);
        expect(await orThrow(b.verifyProjection())).toEqual([]);
      });

      it('an append at a stale or future seq loses, as a value carrying the state now, and writes nothing', async () => {
        const store = await open(await fresh());
        expect((await orThrow(store.appendEvents('g', -1, [claimed(1)]))).won).toBe(true);
        const again = await orThrow(store.appendEvents('g', -1, [claimed(2, 'r2', 'f2')]));
        expect(again).toEqual({ won: false, state: expect.objectContaining({ guid: 'g', lastSeq: 0, request: 'r', fingerprint: 'f' }) });
        expect(await orThrow(store.appendEvents('g', 5, [sent(3)]))).toEqual({ won: false, state: expect.objectContaining({ lastSeq: 0 }) });
        expect((await orThrow(store.readStream('g'))).map((e) => e.seq)).toEqual([0]);
        const next = await orThrow(store.appendEvents('g', 0, [sent(3)]));
        expect(next).toMatchObject({ won: true, state: { status: 'SENT', lastSeq: 1 }, events: [{ guid: 'g', seq: 1, type: 'Sent' }] });
        expect((await orThrow(store.readStream('g'))).map((e) => e.seq)).toEqual([0, 1]);
      });

      it('execute with the row the caller saw gives what execute without it gives, whether that row is still the one stored or not', async () => {
        const store = await open(await fresh());
        // Seen right: no row, then the row the claim returned.
        const claim = await orThrow(store.execute('g', submit(), undefined, { state: null }));
        if (claim.kind !== 'applied') throw new Error('claim refused');
        const timedOut = await orThrow(store.execute('g', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }, undefined, { state: claim.state }));
        expect(timedOut).toMatchObject({ kind: 'applied', state: { status: 'UNKNOWN', lastSeq: 2 } });
        // Seen out of date: the claim's SENT row, though the row is UNKNOWN now. The answer still counts, as a late answer.
        const late = await orThrow(store.execute('g', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{}', latencyMs: 1 }, undefined, { state: claim.state }));
        expect(late).toMatchObject({ kind: 'applied', state: { status: 'DONE', lastSeq: 3 }, events: [{ seq: 3, type: 'Resolved', data: { source: 'late-answer' } }] });
        // Seen out of date: no row, though there is one: refused as exists, as without seen.
        const again = await orThrow(store.execute('g', submit(), undefined, { state: null }));
        expect(again).toMatchObject({ kind: 'refused', refusal: { reason: 'exists', state: { status: 'DONE' } } });
        // A refusal on what was seen is decided again on the row as it is.
        const stale = await orThrow(store.execute('g', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }, undefined, { state: { ...claim.state, attempts: 9 } }));
        expect(stale).toMatchObject({ kind: 'refused', refusal: { reason: 'wrong-status', state: { status: 'DONE' } } });
        expect((await orThrow(store.readStream('g'))).map((e) => [e.seq, e.type])).toEqual([[0, 'Claimed'], [1, 'Sent'], [2, 'TimedOut'], [3, 'Resolved']]);
        expect(await orThrow(store.verifyProjection())).toEqual([]);
      });

      it('execute with a seen row whose stream has gone since (purged, its tombstone removed): refused as without it, no gap in the log (found in review)', async () => {
        let now = 1000;
        const store = await open(await fresh(), { clock: () => now });
        const claim = await orThrow(store.execute('g', submit()));
        if (claim.kind !== 'applied') throw new Error('claim refused');
        await orThrow(store.execute('g', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{}', latencyMs: 1 }));
        now = 5000;
        await orThrow(store.execute('g', { type: 'Purge', retentionMs: 0 }));
        expect(await orThrow(store.removeTombstones(now + 1))).toBe(1);
        // A late outcome still holding the claim's row: the stream it knew is gone, so seq 2 is free in the log.
        const late = await orThrow(store.execute('g', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }, undefined, { state: claim.state }));
        expect(late).toMatchObject({ kind: 'refused', refusal: { reason: 'not-found', state: null } });
        expect(await orThrow(store.readStream('g'))).toEqual([]);
        expect(await orThrow(store.getLedger('g'))).toBeNull();
        expect(await orThrow(store.verifyProjection())).toEqual([]);
      });

      it('a projection behind the log: the append loses and never overwrites the log', async () => {
        const f = await fresh();
        const store = await open(f);
        await orThrow(store.execute('g', submit()));
        await f.backdoor.setProjectionSeq('g', 0);
        const r = await orThrow(store.appendEvents('g', 0, [sent(3)]));
        expect(r.won).toBe(false);
        // The same through decide: the lost append comes back as the refusal `exists`, with the state now.
        const e = await orThrow(store.execute('g', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
        expect(e).toMatchObject({ kind: 'refused', refusal: { reason: 'exists', state: { guid: 'g', lastSeq: 0 } } });
        expect((await orThrow(store.readStream('g'))).map((ev) => [ev.seq, ev.type])).toEqual([[0, 'Claimed'], [1, 'Sent']]);
      });

      it('readAll pages the whole log in global order', async () => {
        const store = await open(await fresh());
        for (const g of ['b', 'a', 'c']) await orThrow(store.execute(g, submit(g)));
        const all = await orThrow(store.readAll(-1, 100));
        expect(all.map((e) => [e.guid, e.seq])).toEqual([['b', 0], ['b', 1], ['a', 0], ['a', 1], ['c', 0], ['c', 1]]);
        const page = await orThrow(store.readAll(all[1]!.position, 2));
        expect(page.map((e) => [e.guid, e.seq])).toEqual([['a', 0], ['a', 1]]);
      });

      it('units of one GUID in one batch see each other, in the order they were submitted; the events carry the positions the log gave them', async () => {
        const f = await fresh();
        const store = await open(f);
        const secret = '{"guid":"g","from":"ACC-SECRET","note":"caf\u00e9 \\u0000 \u{1F600}"}';
        const [claim, answered, purged, stale, again] = await Promise.all([
          orThrow(store.execute('g', submit('fg', secret))),
          orThrow(store.execute('g', answer('{"code":"0000","bal":42}'))),
          orThrow(store.execute('g', { type: 'Purge', retentionMs: 0 })),
          orThrow(store.appendEvents('g', 0, [sent(5)])),
          orThrow(store.execute('g', submit('fg'))),
        ]);
        expect(claim).toMatchObject({ kind: 'applied', state: { status: 'SENT', lastSeq: 1, request: secret } });
        expect(answered).toMatchObject({ kind: 'applied', state: { status: 'DONE', lastSeq: 2 } });
        expect(purged).toMatchObject({ kind: 'applied', state: { status: 'PURGED', lastSeq: 3, request: null } });
        expect(stale).toMatchObject({ won: false, state: { status: 'PURGED', lastSeq: 3 } });
        expect(again).toMatchObject({ kind: 'refused', refusal: { reason: 'exists', state: { status: 'PURGED' } } });
        const stream = await orThrow(store.readStream('g'));
        expect(stream.map((e) => [e.seq, e.type])).toEqual([[0, 'Claimed'], [1, 'Sent'], [2, 'Answered'], [3, 'Purged']]);
        const positions = stream.map((e) => e.position);
        expect(positions).toEqual([...positions].sort((x, y) => x - y));
        if (claim.kind === 'applied') expect(claim.events.map((e) => e.position)).toEqual(positions.slice(0, 2));
        // Purged in the batch that wrote them: the raw request and answer are not in the log's stored data.
        const raw = await f.backdoor.rawEventData('g');
        expect(raw).not.toContain('ACC-SECRET');
        expect(raw).not.toContain('bal');
        expect(await orThrow(store.verifyProjection())).toEqual([]);
      });

      it('raw request and response bytes come back byte for byte, from the row and from the log', async () => {
        const store = await open(await fresh());
        const request = '{ "guid" : "g",\n\t"amount":100, "x":"\\u00e9 é \\" \\\\ \u2028 \u{10FFFF}", "nul":"\\u0000" }';
        const response = '{"code":"0000",  "b":[1,2,{"c":"\\ud83d\\ude00"}]}';
        await orThrow(store.execute('g', submit('fp', request)));
        await orThrow(store.execute('g', answer(response)));
        expect(await orThrow(store.getLedger('g'))).toMatchObject({ request, response, status: 'DONE', code: '0000' });
        const stream = await orThrow(store.readStream('g'));
        expect(stream[0]!.data).toEqual({ request, fingerprint: 'fp' });
        expect(stream[2]!.data).toMatchObject({ response });
        expect((await orThrow(store.readAll(-1, 10))).map((e) => e.seq)).toEqual([0, 1, 2]);
      });

      it("a claim's trace context (CONTRACT.md §10) comes back from the log, and a claim without one (as written before #30) still reads", async () => {
        const store = await open(await fresh());
        const trace = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'congo=t61rcWkgMzE' };
        await orThrow(store.execute('t', { type: 'Submit', request: '{"guid":"t"}', fingerprint: 'fp', timeoutMs: 3000, maxAttempts: 3, trace }));
        await orThrow(store.execute('old', submit('fp', '{"guid":"old"}')));
        const [claimedWith] = await orThrow(store.readStream('t'));
        expect(claimedWith!.data).toEqual({ request: '{"guid":"t"}', fingerprint: 'fp', trace });
        const [claimedWithout] = await orThrow(store.readStream('old'));
        expect(claimedWithout!.data).toEqual({ request: '{"guid":"old"}', fingerprint: 'fp' });
        // Kept in the log only: the row is the same with or without it.
        expect(await orThrow(store.verifyProjection())).toEqual([]);
      });
    });

    describe('batch isolation', () => {
      it('a unit the domain refuses to fold fails alone; the others in its batch commit', async () => {
        const store = await open(await fresh());
        const [a, bad, b] = await Promise.allSettled([
          orThrow(store.execute('a', submit())),
          // Sent before Claimed: evolve throws; only this unit fails.
          orThrow(store.appendEvents('x', -1, [sent(1)])),
          orThrow(store.execute('b', submit())),
        ]);
        expect([a.status, bad.status, b.status]).toEqual(['fulfilled', 'rejected', 'fulfilled']);
        expect(await orThrow(store.readStream('x'))).toEqual([]);
        expect((await orThrow(store.queryLedger({}))).map((r) => r.guid)).toEqual(['a', 'b']);
      });

      it('a unit whose row does not decode fails alone, LEDGER_CORRUPT; the others in its batch commit', async () => {
        const f = await fresh();
        const store = await open(f);
        await orThrow(store.execute('x', submit()));
        await f.backdoor.setProjectionStatus('x', 'BOGUS', null);
        const [a, bad, b] = await Promise.all([
          store.execute('a', submit()),
          store.execute('x', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{}', latencyMs: 1 }),
          store.execute('b', submit()),
        ]);
        expect([a._tag, bad._tag, b._tag]).toEqual(['Right', 'Left', 'Right']);
        expect(bad._tag === 'Left' && bad.left.code).toBe('LEDGER_CORRUPT');
        expect((await orThrow(store.readStream('x'))).map((e) => e.type)).toEqual(['Claimed', 'Sent']);
        expect((await orThrow(store.readStream('a'))).length).toBeGreaterThan(0);
      });

      it('an append of several events that meets a taken seq partway leaves none of its own events; the rest of the batch commits', async () => {
        const f = await fresh();
        const store = await open(f);
        // A stray event at seq 1 with no seq 0 and no projection row: Claimed (seq 0) goes in, Sent (seq 1) cannot.
        await f.backdoor.insertEvent('x', 1, 'Sent', '{"attempt":1,"timeoutMs":1}');
        const [a, x, b] = await Promise.all([orThrow(store.execute('a', submit())), orThrow(store.execute('x', submit())), orThrow(store.execute('b', submit()))]);
        expect([a.kind, x.kind, b.kind]).toEqual(['applied', 'refused', 'applied']);
        expect((await orThrow(store.readStream('x'))).map((e) => [e.seq, e.type])).toEqual([[1, 'Sent']]);
        expect(await orThrow(store.getLedger('x'))).toBeNull();
        expect((await orThrow(store.readStream('a'))).map((e) => e.seq)).toEqual([0, 1]);
      });

      it('the store failing mid-unit fails the whole batch as LEDGER_UNAVAILABLE: nothing of any unit in it is durable', async () => {
        const f = await fresh();
        const store = await open(f);
        await f.backdoor.failProjectionWritesOf('boom');
        const results = await Promise.allSettled([orThrow(store.execute('a', submit())), orThrow(store.execute('boom', submit())), orThrow(store.execute('b', submit()))]);
        for (const r of results) {
          expect(r.status).toBe('rejected');
          if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'LEDGER_UNAVAILABLE' });
        }
        expect(await orThrow(store.readAll(-1, 100))).toEqual([]);
        expect(await orThrow(store.queryLedger({}))).toEqual([]);
        expect((await orThrow(store.execute('a', submit()))).kind).toBe('applied');
      });

      it('an event the database could not store is refused before anything of its unit is written, with the same message on every store; the rest of the batch commits', async () => {
        const store = await open(await fresh());
        const [a, , b] = await Promise.all([
          store.execute('a', submit()),
          expectLeft(store.appendEvents('x', -1, [{ type: 'Claimed', at: { not: 'a time' } as unknown as number, data: { request: 'r', fingerprint: 'f' } }]), 'LEDGER_UNAVAILABLE', /event Claimed has no valid time/),
          store.execute('b', submit()),
        ]);
        expect([E.isRight(a), E.isRight(b)]).toEqual([true, true]);
        expect(await orThrow(store.readStream('x'))).toEqual([]);
        expect((await orThrow(store.queryLedger({}))).map((r) => r.guid)).toEqual(['a', 'b']);
      });

      it('a row another session holds past the lock wait fails the whole batch as LEDGER_UNAVAILABLE, writing nothing; once it is let go, writes go through', async () => {
        const f = await fresh();
        const store = await open(f, { busyTimeoutMs: 200 });
        await orThrow(store.execute('held', submit()));
        const release = await f.backdoor.lock('held');
        try {
          // One batch: an outcome for the held row and a claim of a row nobody holds. Failed by the lock wait, not the
          // write deadline (a second later).
          await Promise.all([expectLeft(store.execute('held', answer()), 'LEDGER_UNAVAILABLE', /lock/), expectLeft(store.execute('new', submit()), 'LEDGER_UNAVAILABLE', /lock/)]);
        } finally {
          await release();
        }
        expect(await orThrow(store.getLedger('new'))).toBeNull();
        expect((await orThrow(store.execute('held', answer()))).kind).toBe('applied');
        expect((await orThrow(store.execute('new', submit()))).kind).toBe('applied');
      });

      it('a claim deadline given at open (serve gives its send window) cuts a claim behind a lock short: LEDGER_UNAVAILABLE at it, never written; an outcome beside it keeps the lock wait plus the margin; the next claim goes through', async () => {
        const f = await fresh();
        const store = await open(f, { busyTimeoutMs: 5000, claimDeadlineMs: 300 });
        await orThrow(store.execute('warm', submit('warm')));
        // Another session's long write: the store waits for the lock.
        const release = await f.backdoor.lock();
        // An outcome submitted with the claim is not a claim: it keeps the lock wait plus the margin.
        let outcomeSettled = false;
        const outcome = orThrow(store.execute('warm', answer())).finally(() => (outcomeSettled = true));
        try {
          await expectLeft(store.execute('late', submit('late')), 'LEDGER_UNAVAILABLE', /did not complete within 300 ms/);
          expect(outcomeSettled).toBe(false);
        } finally {
          await release();
        }
        expect((await outcome).kind).toBe('applied');
        // Once the lock is free the store comes to the claim, whose caller has answered without it: left unwritten.
        expect((await orThrow(store.execute('after', submit('after')))).kind).toBe('applied');
        expect(await orThrow(store.getLedger('late'))).toBeNull();
        expect((await orThrow(store.execute('late', submit('late')))).kind).toBe('applied');
      });
    });

    describe('crash recovery', () => {
      it('reopened after a writer was SIGKILLed mid-load: every acknowledged append is there, and the projection equals the log', async () => {
        const f = await fresh();
        await (await open(f)).close();
        stores.length = 0;
        const child = spawnNode(childScript('acker'), [f.db, 'k']);
        let acked = '';
        child.stdout!.on('data', (d: Buffer) => (acked += d.toString()));
        try {
          await waitForLine(child, 'ready');
          await sleep(50 + Math.floor(Math.random() * 150)); // the point: killed at a random moment of its work
        } finally {
          const exited = new Promise((r) => child.once('exit', r));
          child.kill('SIGKILL');
          await exited;
        }
        const guids = acked.split('\n').filter((l) => l.startsWith('k-'));
        expect(guids.length).toBeGreaterThan(0);
        const store = await open(f);
        for (const g of guids) expect((await orThrow(store.readStream(g))).map((e) => e.type), g).toEqual(['Claimed', 'Sent']);
        expect(await orThrow(store.verifyProjection())).toEqual([]);
        // Nothing half-written either: every stream in the log is whole.
        const log = await orThrow(store.readAll(-1, 1_000_000));
        for (const g of new Set(log.map((e) => e.guid))) expect((await orThrow(store.readStream(g))).length, g).toBe(2);
      }, 60_000);
    });

    describe('read model', () => {
      it('query by GUID, status, age, attempts, keyset and limit, in byte order of the GUIDs; counts and the oldest row per status', async () => {
        let now = 1000;
        const store = await open(await fresh(), { clock: () => now });
        await orThrow(store.execute('a', submit()));
        now = 2000;
        await orThrow(store.execute('b', submit()));
        await orThrow(store.execute('b', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
        await orThrow(store.execute('B', submit()));
        await orThrow(store.execute('B', { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' }));
        await orThrow(store.execute('B', { type: 'Send', timeoutMs: 10, maxAttempts: 5 }));
        const guids = async (q: LedgerQuery) => (await orThrow(store.queryLedger(q))).map((r) => r.guid);
        expect(await guids({})).toEqual(['B', 'a', 'b']); // byte order, as SQLite compares
        expect(await guids({ statuses: ['SENT'] })).toEqual(['B', 'a']);
        expect(await guids({ statuses: [] })).toEqual([]);
        expect(await guids({ statuses: ['SENT', 'UNKNOWN'], updatedBefore: 2000 })).toEqual(['a']);
        expect(await guids({ sentAtOrBefore: 1999 })).toEqual(['a']);
        expect(await guids({ attemptsAtLeast: 2 })).toEqual(['B']);
        expect(await guids({ attemptsAtLeast: 3 })).toEqual([]);
        expect(await guids({ attemptsBelow: 2 })).toEqual(['a', 'b']);
        expect(await guids({ attemptsBelow: 1 })).toEqual([]);
        expect(await guids({ afterGuid: 'B' })).toEqual(['a', 'b']);
        expect(await guids({ afterGuid: 'B', limit: 1 })).toEqual(['a']);
        expect(await guids({ attemptsAtLeast: 1, afterGuid: 'a', limit: 5 })).toEqual(['b']);
        expect(await guids({ guid: 'b' })).toEqual(['b']);
        expect(await guids({ guid: 'b', statuses: ['SENT'] })).toEqual([]);
        // The rows of several GUIDs at once (the relay's waiting requests): only those, with the other filters.
        expect(await guids({ guids: ['b', 'a', 'nobody'] })).toEqual(['a', 'b']);
        expect(await guids({ guids: ['b', 'a', 'B'], statuses: ['UNKNOWN', 'DONE'] })).toEqual(['b']);
        expect(await guids({ guids: [] })).toEqual([]);
        // Reconciliation's window: created in [from, to), from inclusive, to exclusive.
        expect(await guids({ createdFrom: 2000 })).toEqual(['B', 'b']);
        expect(await guids({ createdBefore: 2000 })).toEqual(['a']);
        expect(await guids({ createdFrom: 1000, createdBefore: 2001, afterGuid: 'B', limit: 1 })).toEqual(['a']);
        expect(await orThrow(store.countLedger({ createdFrom: 1000, createdBefore: 2000 }))).toBe(1);
        expect(await orThrow(store.countLedger({ guid: 'a', statuses: ['SENT'] }))).toBe(1);
        expect(await orThrow(store.countLedger({ statuses: ['SENT'] }))).toBe(2);
        expect(await orThrow(store.countLedger({ statuses: ['SENT'], attemptsBelow: 2 }))).toBe(1);
        expect(await orThrow(store.countLedger({ statuses: ['SENT', 'UNKNOWN'] }))).toBe(3);
        expect(await orThrow(store.countByStatus())).toMatchObject({ SENT: { count: 2, oldestUpdatedAt: 1000 }, UNKNOWN: { count: 1, oldestUpdatedAt: 2000 }, DONE: { count: 0, oldestUpdatedAt: null } });
      });

      it('order updated: the last change newest first, ties by GUID descending, keyset paged on (updatedAt, GUID) with the filters (#28, ledger --sort updated)', async () => {
        let now = 1000;
        const store = await open(await fresh(), { clock: () => now });
        for (const [g, at] of [['a', 3000], ['b', 1000], ['c', 2000], ['d', 2000], ['e', 2000]] as const) {
          now = at;
          await orThrow(store.execute(g, submit(g)));
        }
        now = 4000;
        await orThrow(store.execute('b', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
        const guids = async (q: LedgerQuery) => (await orThrow(store.queryLedger({ ...q, order: 'updated' }))).map((r) => r.guid);
        expect(await guids({})).toEqual(['b', 'a', 'e', 'd', 'c']);
        expect(await guids({ limit: 2 })).toEqual(['b', 'a']);
        expect(await guids({ beforeRow: { updatedAt: 2000, guid: 'e' } })).toEqual(['d', 'c']);
        expect(await guids({ beforeRow: { updatedAt: 3000, guid: 'a' }, limit: 2 })).toEqual(['e', 'd']);
        expect(await guids({ statuses: ['SENT'], beforeRow: { updatedAt: 4000, guid: 'b' } })).toEqual(['a', 'e', 'd', 'c']);
        expect(await guids({ statuses: ['UNKNOWN'] })).toEqual(['b']);
        expect(await orThrow(store.countLedger({ beforeRow: { updatedAt: 2000, guid: 'd' } }))).toBe(1);
        // The default order is still the GUID's.
        expect((await orThrow(store.queryLedger({}))).map((r) => r.guid)).toEqual(['a', 'b', 'c', 'd', 'e']);
      });

      it('now() is the clock events are stamped with, read afresh on every call', async () => {
        let now = 1000;
        const store = await open(await fresh(), { clock: () => now });
        expect(await orThrow(store.now())).toBe(1000);
        now = 2500;
        const r = await orThrow(store.execute('a', submit()));
        expect(r.kind === 'applied' && r.state.createdAt).toBe(2500);
        expect(await orThrow(store.now())).toBe(2500);
        // Without a clock given: the store's own (the host's, or the database server's), near this host's here.
        const own = await open(await fresh());
        expect(Math.abs((await orThrow(own.now())) - Date.now())).toBeLessThan(60_000);
      });

      it('leases: a row another holder leases is not leased again until that lease ends or runs out; a row that moved since it was read is not leased', async () => {
        let now = 1000;
        const store = await open(await fresh(), { clock: () => now });
        for (const g of ['a', 'b', 'c']) await orThrow(store.execute(g, submit(g)));
        const rows = (await orThrow(store.queryLedger({}))).map(({ guid, lastSeq }) => ({ guid, lastSeq }));
        expect(await orThrow(store.leaseRows('one', rows.slice(0, 2), 500))).toEqual(new Set(['a', 'b']));
        expect(await orThrow(store.leaseRows('two', rows, 500))).toEqual(new Set(['c']));
        // Its own lease is renewed; a row read at an older seq is not leased whoever holds it.
        expect(await orThrow(store.leaseRows('one', [rows[0]!, { guid: 'b', lastSeq: 0 }, { guid: 'x', lastSeq: 1 }], 500))).toEqual(new Set(['a']));
        await orThrow(store.releaseLeases('one'));
        expect(await orThrow(store.leaseRows('two', rows, 500))).toEqual(new Set(['a', 'b', 'c']));
        // 'two' dies holding them: they come back once its leases have run out, by the ledger's clock.
        expect(await orThrow(store.leaseRows('three', rows, 500))).toEqual(new Set());
        now = 1499;
        expect(await orThrow(store.leaseRows('three', rows, 500))).toEqual(new Set());
        now = 1500;
        expect(await orThrow(store.leaseRows('three', rows, 500))).toEqual(new Set(['a', 'b', 'c']));
        expect(await orThrow(store.leaseRows('three', [], 500))).toEqual(new Set());
      });

      it('two stores leasing and releasing one backlog over and over, from several holders at once: no call fails (found in review: rows locked in GUID order by both, or PostgreSQL deadlocks)', async () => {
        const f = await fresh();
        const [a, b] = [await open(f), await open(f)];
        const guids = Array.from({ length: 40 }, (_, i) => `L-${String(i).padStart(2, '0')}`);
        for (const g of guids) await orThrow(a.execute(g, submit(g)));
        const rows = (await orThrow(a.queryLedger({}))).map(({ guid, lastSeq }) => ({ guid, lastSeq }));
        const failures: string[] = [];
        const churn = async (store: EventStore, holder: string) => {
          for (let i = 0; i < 60; i++) {
            // Short leases, so each release also deletes the other's run-out ones; rows in a shuffled order.
            const mine = [...rows].sort(() => Math.random() - 0.5).slice(0, 25);
            const leased = await store.leaseRows(holder, mine, 1 + (i % 3));
            if (E.isLeft(leased)) failures.push(leased.left.message);
            const released = await store.releaseLeases(holder);
            if (E.isLeft(released)) failures.push(released.left.message);
          }
        };
        await Promise.all([churn(a, 'one'), churn(b, 'two'), churn(a, 'three'), churn(b, 'four')]);
        expect(failures).toEqual([]);
      });

      it('a row FAILED by an inquiry says so (failedByInquiry), in the projection and in a rebuild; a refused connection does not', async () => {
        const store = await open(await fresh());
        for (const g of ['a', 'b']) await orThrow(store.execute(g, submit(g)));
        await orThrow(store.execute('a', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
        await orThrow(store.execute('a', { type: 'Resolve', outcome: 'absent' }));
        await orThrow(store.execute('b', { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' }));
        expect(await orThrow(store.getLedger('a'))).toMatchObject({ status: 'FAILED', failedByInquiry: true });
        expect(await orThrow(store.getLedger('b'))).toMatchObject({ status: 'FAILED', failedByInquiry: false });
        await orThrow(store.rebuildProjection());
        expect(await orThrow(store.verifyProjection())).toEqual([]);
        expect((await orThrow(store.getLedger('a')))?.failedByInquiry).toBe(true);
      });

      it('inquiry schedule: unclear inquiries about one attempt space out the next (min-age, 2×, 4×, …); a new Sent starts again; inquiryDueBy selects what is due', async () => {
        let now = 1000;
        const store = await open(await fresh(), { clock: () => now });
        for (const g of ['a', 'b']) {
          await orThrow(store.execute(g, submit(g)));
          await orThrow(store.execute(g, { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
        }
        expect(await orThrow(store.recordUnclearInquiry('a', 1000, 5000, 100))).toEqual({ inquiries: 1, nextInquiryAt: 5100 });
        expect(await orThrow(store.recordUnclearInquiry('a', 1000, 5100, 100))).toEqual({ inquiries: 2, nextInquiryAt: 5300 });
        const due = async (at: number) => (await orThrow(store.queryLedger({ statuses: ['UNKNOWN'], inquiryDueBy: at }))).map((r) => r.guid);
        expect([await due(5299), await due(5300)]).toEqual([['b'], ['a', 'b']]);
        expect(await orThrow(store.countLedger({ inquiryDueBy: 5299 }))).toBe(1);
        // An inquiry about an older attempt (another sent_at) does not hold back the current one, and starts the count again.
        expect(await orThrow(store.recordUnclearInquiry('a', 900, 5400, 100))).toEqual({ inquiries: 1, nextInquiryAt: 5500 });
        now = 6000;
        expect(await orThrow(store.recordUnclearInquiry('a', 1000, 6000, 100))).toEqual({ inquiries: 1, nextInquiryAt: 6100 });
        // The wait grows up to an hour and stays there, however many inquiries could not tell.
        const waits: number[] = [];
        for (let i = 2; i <= 40; i++) waits.push((await orThrow(store.recordUnclearInquiry('a', 1000, 7000, 100))).nextInquiryAt - 7000);
        expect(waits.slice(0, 3)).toEqual([200, 400, 800]);
        expect(waits.slice(-20)).toEqual(Array.from({ length: 20 }, () => 3_600_000));
      });

      it('rows read back are decoded, not cast: a row changed behind the store is LEDGER_CORRUPT, not a state', async () => {
        const f = await fresh();
        const store = await open(f);
        await orThrow(store.execute('a', submit()));
        await f.backdoor.setProjectionStatus('a', 'BOGUS', null);
        await expectLeft(store.getLedger('a'), 'LEDGER_CORRUPT');
      });
    });

    describe('maintenance', () => {
      it('rebuild reproduces the projection from the log; verify names every row that differs, and changes nothing', async () => {
        const f = await fresh();
        const store = await open(f);
        for (const g of ['a', 'b', 'c']) await orThrow(store.execute(g, submit()));
        await orThrow(store.execute('a', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{"ok":1}', latencyMs: 3 }));
        await orThrow(store.execute('b', { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' }));
        expect(await orThrow(store.verifyProjection())).toEqual([]);
        await f.backdoor.setProjectionStatus('a', 'FAILED', 'E902');
        await f.backdoor.deleteProjectionRow('c');
        const diffs = await orThrow(store.verifyProjection());
        expect(diffs.map((d) => [d.guid, d.kind, d.columns])).toEqual([
          ['a', 'differs', ['status', 'code']],
          ['c', 'missing', []],
        ]);
        expect((await orThrow(store.getLedger('a')))?.status).toBe('FAILED');
        expect(await orThrow(store.rebuildProjection())).toEqual({ rows: 3 });
        expect(await orThrow(store.verifyProjection())).toEqual([]);
        expect(await orThrow(store.getLedger('a'))).toMatchObject({ status: 'DONE', code: '0000', response: '{"ok":1}' });
        expect(await orThrow(store.getLedger('c'))).toMatchObject({ status: 'SENT', attempts: 1 });
      });

      it('Purged takes the raw request and response out of the log too; tombstones go with their events after their retention', async () => {
        let now = 1000;
        const f = await fresh();
        const store = await open(f, { clock: () => now });
        await orThrow(store.execute('a', submit('fa', '{"guid":"a","from":"ACC-SECRET"}')));
        await orThrow(store.execute('a', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{"code":"0000","bal":42}', latencyMs: 3 }));
        await orThrow(store.execute('keep', submit('fk', '{"guid":"keep","from":"ACC-KEPT"}')));
        expect(await f.backdoor.rawEventData('a')).toContain('ACC-SECRET');
        now = 5000;
        expect((await orThrow(store.execute('a', { type: 'Purge', retentionMs: 1000 }))).kind).toBe('applied');
        const raw = await f.backdoor.rawEventData('a');
        expect(raw).not.toContain('ACC-SECRET');
        expect(raw).not.toContain('bal');
        expect(await f.backdoor.rawEventData('keep')).toContain('ACC-KEPT');
        expect(await orThrow(store.getLedger('a'))).toMatchObject({ status: 'PURGED', code: '0000', fingerprint: 'fa', request: null, response: null, createdAt: 1000, updatedAt: 5000 });
        expect(await orThrow(store.verifyProjection())).toEqual([]);
        expect(await orThrow(store.removeTombstones(5000))).toBe(0);
        expect(await orThrow(store.removeTombstones(5001))).toBe(1);
        expect(await orThrow(store.readStream('a'))).toEqual([]);
        expect(await orThrow(store.getLedger('a'))).toBeNull();
        expect((await orThrow(store.readStream('keep'))).length).toBe(2);
        // The ledger still holds events, so it takes room; and it is the size reclaimSpace starts from.
        const space = await orThrow(store.spaceOnDisk());
        expect(space).toBeGreaterThan(0);
        expect((await orThrow(store.reclaimSpace())).bytesBefore).toBe(space);
      });

      it('reclaimSpace gives the space purges freed back: the raw bodies purge took out, then the tombstones removed', async () => {
        const store = await open(await fresh());
        // Random text: PostgreSQL compresses repetitive values, so padding of one letter would take no space.
        const pad = () => randomBytes(3000).toString('base64');
        const all = (make: (g: string) => Promise<unknown>) => Promise.all(Array.from({ length: 300 }, (_, i) => make(`g${i}`)));
        await all((g) => orThrow(store.execute(g, submit(g, `{"pad":"${pad()}"}`))));
        await all((g) => orThrow(store.execute(g, answer())));
        // Nothing to give back yet: what the bodies take, settled on disk (SQLite: the WAL folded into the file).
        const full = (await orThrow(store.reclaimSpace())).bytesAfter;
        await all((g) => orThrow(store.execute(g, { type: 'Purge', retentionMs: 0 })));
        const size = await orThrow(store.spaceOnDisk());
        const purged = await orThrow(store.reclaimSpace());
        expect(purged.bytesBefore).toBe(size);
        expect(purged.bytesAfter).toBeLessThan(full / 2);
        expect(await orThrow(store.countLedger({ statuses: ['PURGED'] }))).toBe(300);
        expect(await orThrow(store.removeTombstones(Date.now() + 1))).toBe(300);
        const removed = await orThrow(store.reclaimSpace());
        expect(removed.bytesAfter).toBeLessThanOrEqual(removed.bytesBefore);
        expect(await orThrow(store.spaceOnDisk())).toBe(removed.bytesAfter);
      });

      it('an answer to an older attempt is kept as a StaleAnswer that changes no state; purge takes its body out of the log and keeps its SHA-256; on a tombstone no body is stored at all', async () => {
        let now = 1000;
        const f = await fresh();
        const store = await open(f, { clock: () => now });
        const late = { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{"code":"0000","bal":"STALE-SECRET"}', latencyMs: 9000 } as const;
        // computed apart: printf '%s' '{"code":"0000","bal":"STALE-SECRET"}' | sha256sum
        const sha = '02b2077051e3cbc401f573f0bcf052efd762c83bafc4190c738b526075054580';
        await orThrow(store.execute('a', submit('fa')));
        await orThrow(store.execute('a', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
        await orThrow(store.execute('a', { type: 'Resolve', outcome: 'absent' }));
        await orThrow(store.execute('a', { type: 'Send', timeoutMs: 3000, maxAttempts: 3, minAgeMs: 0, inquiry: { seq: 3, at: 10 ** 12, answer: { kind: 'absent' } } }));
        await orThrow(store.execute('a', { type: 'RecordConnectFailure', attempt: 2, reason: 'refused' }));
        const before = (await orThrow(store.getLedger('a')))!;
        expect(before).toMatchObject({ status: 'FAILED', attempts: 2, failedByInquiry: false, lastSeq: 5 });
        now = 2000;
        const stale = await orThrow(store.execute('a', late));
        expect(stale).toMatchObject({ kind: 'applied', events: [{ seq: 6, type: 'StaleAnswer', data: { attempt: 1, currentAttempt: 2, code: '0000', response: late.response, responseSha256: sha, latencyMs: 9000 } }] });
        // No transition; only that one of its attempts did arrive: a resend of it must inquire first.
        expect(await orThrow(store.getLedger('a'))).toEqual({ ...before, lastSeq: 6, failedByInquiry: true });
        await orThrow(store.rebuildProjection());
        expect(await orThrow(store.verifyProjection())).toEqual([]);
        expect(await orThrow(store.getLedger('a'))).toEqual({ ...before, lastSeq: 6, failedByInquiry: true });

        // A DONE row: the older attempt's body is kept until purge takes it out, with the other answers'.
        await orThrow(store.execute('b', submit('fb')));
        await orThrow(store.execute('b', { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' }));
        await orThrow(store.execute('b', { type: 'Send', timeoutMs: 3000, maxAttempts: 3 }));
        await orThrow(store.execute('b', { type: 'RecordAnswer', attempt: 2, code: '0000', response: '{"code":"0000"}', latencyMs: 3 }));
        expect(await orThrow(store.execute('b', late))).toMatchObject({ kind: 'applied', state: { status: 'DONE', response: '{"code":"0000"}' } });
        expect(await f.backdoor.rawEventData('b')).toContain('STALE-SECRET');
        now = 9000;
        await orThrow(store.execute('b', { type: 'Purge', retentionMs: 1000 }));
        expect(await f.backdoor.rawEventData('b')).not.toContain('STALE-SECRET');
        expect((await orThrow(store.readStream('b'))).find((e) => e.type === 'StaleAnswer')?.data).toMatchObject({ response: null, responseSha256: sha, code: '0000' });
        // On the tombstone: the code and SHA-256 only, as purge keeps them; the row stays a tombstone.
        const onTombstone = await orThrow(store.execute('b', { ...late, response: '{"code":"0000","bal":"LATER-SECRET"}' }));
        expect(onTombstone).toMatchObject({ kind: 'applied', state: { status: 'PURGED', code: '0000' }, events: [{ type: 'StaleAnswer', data: { response: null, currentAttempt: 2 } }] });
        expect(await f.backdoor.rawEventData('b')).not.toContain('LATER-SECRET');
        expect(await orThrow(store.verifyProjection())).toEqual([]);
      });

      it('an older attempt answered while the next is in flight: that attempt\'s own outcome still lands (decided again on the row as it is); a refused connection of it leaves the row may-have-arrived', async () => {
        const store = await open(await fresh());
        const older = { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{"code":"0000"}', latencyMs: 9 } as const;
        const inFlight = async (guid: string) => {
          await orThrow(store.execute(guid, submit(guid)));
          await orThrow(store.execute(guid, { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' }));
          const applied = await orThrow(store.execute(guid, { type: 'Send', timeoutMs: 3000, maxAttempts: 3 }));
          if (applied.kind !== 'applied') throw new Error(`${guid}: not sent again`);
          expect((await orThrow(store.execute(guid, older))).kind).toBe('applied');
          // What the caller of attempt 2 still holds: the row as its Sent left it, a seq behind.
          return { state: applied.state };
        };
        const answered = await orThrow(store.execute('c', { type: 'RecordAnswer', attempt: 2, code: 'B201', response: '{"code":"B201"}', latencyMs: 3 }, undefined, await inFlight('c')));
        expect(answered).toMatchObject({ kind: 'applied', state: { status: 'DONE', attempts: 2, code: 'B201' }, events: [{ type: 'Answered' }] });
        const refused = await orThrow(store.execute('d', { type: 'RecordConnectFailure', attempt: 2, reason: 'refused' }, undefined, await inFlight('d')));
        expect(refused).toMatchObject({ kind: 'applied', state: { status: 'FAILED', attempts: 2, failedByInquiry: true } });
        // Attempt 1 reached the account system: a resend must inquire first, never go out unasked.
        expect(await orThrow(store.execute('d', submit('d')))).toMatchObject({ kind: 'refused', refusal: { reason: 'needs-inquiry' } });
        await orThrow(store.rebuildProjection());
        expect(await orThrow(store.verifyProjection())).toEqual([]);
        expect(await orThrow(store.getLedger('d'))).toMatchObject({ status: 'FAILED', failedByInquiry: true });
      });
    });

    describe('audit trail', () => {
      const serveActor: ProcessActor = { by: 'serve', host: 'host-1', pid: 4242 };

      it('every event keeps who wrote it: the process given at open, and the key and parameters of its append; old rows read as null', async () => {
        const f = await fresh();
        const store = await open(f, { actor: serveActor });
        const audit = { key: 'shop-a', params: { timeoutMs: 3000, minAgeMs: 60_000, inquiryStatus: null } };
        const claimed = await orThrow(store.execute('a', submit(), audit));
        expect(claimed.kind === 'applied' && claimed.events.map((e) => e.actor)).toEqual([{ ...serveActor, ...audit }, { ...serveActor, ...audit }]);
        await orThrow(store.execute('a', { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
        const resolved = await orThrow(store.appendEvents('a', 2, [{ type: 'Resolved', at: 5, data: { source: 'inquiry', outcome: 'absent', code: null, response: null } }], { params: { inquiryStatus: 404 } }));
        expect(resolved.won && resolved.events[0]!.actor).toEqual({ ...serveActor, params: { inquiryStatus: 404 } });
        // A store opened without a process part writes no actor; an event written before actors existed has none.
        const anonymous = await open(f);
        await orThrow(anonymous.execute('b', submit(), { key: 'ignored' }));
        await f.backdoor.insertEvent('old', 0, 'Claimed', '{"request":null,"fingerprint":"f"}');

        const stream = await orThrow(store.readStream('a'));
        expect(stream.map((e) => [e.type, e.actor])).toEqual([
          ['Claimed', { ...serveActor, ...audit }],
          ['Sent', { ...serveActor, ...audit }],
          ['TimedOut', serveActor],
          ['Resolved', { ...serveActor, params: { inquiryStatus: 404 } }],
        ]);
        expect((await orThrow(store.readStream('b'))).map((e) => e.actor)).toEqual([null, null]);
        expect((await orThrow(store.readStream('old')))[0]!.actor).toBeNull();
        expect((await orThrow(store.readAll(-1, 100))).find((e) => e.guid === 'a' && e.seq === 3)?.actor).toEqual({ ...serveActor, params: { inquiryStatus: 404 } });
        // Each actor is kept once, the events naming it by id (three actors for four events); an event written before
        // the actors table, its actor's text in the event itself, still reads with it.
        expect(await f.backdoor.actorsStored()).toEqual({ actors: 3, eventsWithText: 0 });
        // evolve ignores it: rebuild and verify stay clean.
        await f.backdoor.deleteProjectionRow('old');
        expect(await orThrow(store.verifyProjection())).toEqual([{ guid: 'old', kind: 'missing', columns: expect.any(Array) as unknown, ledger: null, rebuilt: expect.anything() as unknown }]);
        await f.backdoor.insertEvent('older', 0, 'Claimed', '{"request":null,"fingerprint":"f"}', JSON.stringify(serveActor));
        expect((await orThrow(store.readStream('older')))[0]!.actor).toEqual(serveActor);
        await orThrow(store.rebuildProjection());
        expect(await orThrow(store.verifyProjection())).toEqual([]);
      });

      it('the tombstone keeps the code, its times and a SHA-256 of the answer; an old Purged without it still decodes', async () => {
        let now = 1000;
        const f = await fresh();
        const store = await open(f, { clock: () => now, actor: { by: 'purge', host: 'h', pid: 1 } });
        await orThrow(store.execute('a', submit('fa')));
        await orThrow(store.execute('a', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{"code":"0000","bal":42}', latencyMs: 3 }));
        now = 5000;
        await orThrow(store.execute('a', { type: 'Purge', retentionMs: 1000 }, { params: { retentionMs: 1000 } }));
        const purged = (await orThrow(store.readStream('a'))).at(-1)!;
        // printf '%s' '{"code":"0000","bal":42}' | sha256sum
        expect(purged).toMatchObject({ type: 'Purged', data: { code: '0000', retentionMs: 1000, responseSha256: 'c8271c30ee38f3422bfc306c965c25d4387947f8b31ce95edb2cf186282b9c30' } });
        expect(purged.actor).toEqual({ by: 'purge', host: 'h', pid: 1, params: { retentionMs: 1000 } });
        expect(await orThrow(store.getLedger('a'))).toMatchObject({ status: 'PURGED', code: '0000', createdAt: 1000, updatedAt: 5000 });
        await f.backdoor.insertEvent('old', 0, 'Purged', '{"retentionMs":5,"code":"0000"}');
        expect((await orThrow(store.readStream('old')))[0]!.data).toEqual({ retentionMs: 5, code: '0000' });
      });

      it('request records: stored in one call, read back per GUID in order with their positions; tombstone removal deletes them', async () => {
        let now = 1000;
        const f = await fresh();
        const store = await open(f, { clock: () => now });
        await orThrow(store.execute('a', submit()));
        await orThrow(store.execute('a', { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{}', latencyMs: 1 }));
        await orThrow(store.execute('b', submit()));
        await orThrow(store.recordRequests([
          { guid: 'a', at: 1000, key: 'shop-a', code: '0000', fingerprintMatch: true },
          { guid: 'b', at: 1001, key: null, code: 'E903', fingerprintMatch: true },
          { guid: 'a', at: 1002, key: 'shop-a', code: '0000', fingerprintMatch: true },
          { guid: 'a', at: 1003, key: 'shop-b', code: 'E904', fingerprintMatch: false },
        ]));
        await orThrow(store.recordRequests([]));
        const a = await orThrow(store.readRequests('a'));
        expect(a.map(({ position: _p, ...r }) => r)).toEqual([
          { guid: 'a', at: 1000, key: 'shop-a', code: '0000', fingerprintMatch: true },
          { guid: 'a', at: 1002, key: 'shop-a', code: '0000', fingerprintMatch: true },
          { guid: 'a', at: 1003, key: 'shop-b', code: 'E904', fingerprintMatch: false },
        ]);
        expect(a[0]!.position).toBeLessThan(a[1]!.position);
        expect(a[1]!.position).toBeLessThan(a[2]!.position);
        expect(await orThrow(store.readRequests('nobody'))).toEqual([]);
        // A malformed record is refused before anything of the call is written.
        expect(E.isLeft(await store.recordRequests([{ guid: 'a', at: 1, key: null, code: '0000', fingerprintMatch: true }, { guid: 'a', at: Number.NaN, key: null, code: 'x', fingerprintMatch: true }]))).toBe(true);
        expect(await orThrow(store.readRequests('a'))).toHaveLength(3);
        // Requests change no state: the projection still equals the log.
        expect(await orThrow(store.verifyProjection())).toEqual([]);
        now = 5000;
        await orThrow(store.execute('a', { type: 'Purge', retentionMs: 1000 }));
        expect(await orThrow(store.readRequests('a'))).toHaveLength(3);
        expect(await orThrow(store.removeTombstones(5001))).toBe(1);
        expect(await orThrow(store.readRequests('a'))).toEqual([]);
        expect(await orThrow(store.readRequests('b'))).toHaveLength(1);
      });

      it('key uses: the latest use of each key is kept, never moved back, whoever writes it; they change no state', async () => {
        const f = await fresh();
        const store = await open(f);
        const other = await open(f);
        expect(await orThrow(store.keyUses())).toEqual([]);
        await orThrow(store.recordKeyUses([{ key: 'shop-a', at: 2000 }, { key: 'ops', at: 1500 }]));
        await orThrow(store.recordKeyUses([]));
        // Another process (a second relay) with an older use of one key and a newer of the other, one key given twice.
        await orThrow(other.recordKeyUses([{ key: 'shop-a', at: 1000 }, { key: 'ops', at: 1700 }, { key: 'ops', at: 1600 }]));
        expect(await orThrow(store.keyUses())).toEqual([{ key: 'ops', at: 1700 }, { key: 'shop-a', at: 2000 }]);
        expect(await orThrow(other.keyUses())).toEqual([{ key: 'ops', at: 1700 }, { key: 'shop-a', at: 2000 }]);
        expect(await orThrow(store.verifyProjection())).toEqual([]);
      });
    });

    describe('notification outbox (CONTRACT.md §11)', () => {
      /** An UNKNOWN row `g` (its call timed out) at the clock's time. */
      const unknownRow = async (store: EventStore, g: string) => {
        await orThrow(store.execute(g, submit(g, `{"guid":"${g}"}`)));
        await orThrow(store.execute(g, { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
      };
      const processed: Command = { type: 'Resolve', outcome: 'processed', code: '0000', response: '{"code":"0000","x": 1}' };

      it('the append that settles a row by inquiry records its notification; an answer in the channel\'s own reply records none', async () => {
        let now = 1000;
        const store = await open(await fresh(), { clock: () => now });
        await unknownRow(store, 'u');
        await orThrow(store.execute('d', submit('d', '{"guid":"d"}'), { replied: true }));
        await orThrow(store.execute('d', answer(), { replied: true }));
        now = 2000;
        await orThrow(store.execute('u', processed));
        const [n, ...rest] = await orThrow(store.listNotifications({ limit: 10 }));
        expect(rest).toEqual([]);
        expect(n).toMatchObject({ guid: 'u', seq: 3, type: 'transfer.settled', state: 'pending', attempts: 0, createdAt: 2000, nextAt: 2000, at: 2000 });
        expect(JSON.parse(n!.body)).toMatchObject({ guid: 'u', status: 'DONE', code: '0000', response: '{"code":"0000","x": 1}' });
        expect(await orThrow(store.notificationCounts())).toEqual({ pending: 1, oldestPendingAt: 2000, delivered: 0, givenUp: 0 });
      });

      it('leases: due ones go to one holder at a time until its lease runs out; attempts recorded; a failed one due again at its next time; redeliver queues a delivered one again', async () => {
        let now = 1000;
        const store = await open(await fresh(), { clock: () => now });
        for (const g of ['a', 'b', 'c']) await unknownRow(store, g);
        for (const g of ['a', 'b', 'c']) await orThrow(store.execute(g, processed));
        const one = await orThrow(store.leaseNotifications('one', 2, 500));
        expect(one).toHaveLength(2);
        const two = await orThrow(store.leaseNotifications('two', 10, 500));
        expect(two.map((n) => n.guid)).toEqual(['a', 'b', 'c'].filter((g) => !one.some((n) => n.guid === g)));
        expect(await orThrow(store.leaseNotifications('three', 10, 500))).toEqual([]);
        const outcome = (g: string, result: 'delivered' | 'failed', nextAt: number | null) => ({ guid: g, seq: 3, at: now, result, httpStatus: result === 'delivered' ? 204 : 500, detail: 'x', latencyMs: 2, nextAt, holder: 'one' });
        await orThrow(store.recordDeliveries([outcome(one[0]!.guid, 'delivered', null), outcome(one[1]!.guid, 'failed', 5000)]));
        // 'two' dies holding its lease: the notification is due again once the lease ran out.
        now = 1499;
        expect(await orThrow(store.leaseNotifications('three', 10, 500))).toEqual([]);
        now = 1500;
        expect((await orThrow(store.leaseNotifications('three', 10, 500))).map((n) => n.guid)).toEqual([two[0]!.guid]);
        // At the failed one's next time: it, and the one 'three' leased and left (its lease ran out too).
        now = 5000;
        const again = await orThrow(store.leaseNotifications('four', 10, 500));
        expect(again.map((n) => [n.guid, n.attempts, n.lastResult]).sort()).toEqual([[one[1]!.guid, 1, '500 x'], [two[0]!.guid, 0, null]].sort());
        expect((await orThrow(store.notificationAttempts(one[1]!.guid))).map((x) => [x.result, x.httpStatus])).toEqual([['failed', 500]]);
        expect(await orThrow(store.listNotifications({ state: 'delivered', limit: 10 }))).toMatchObject([{ guid: one[0]!.guid, deliveredAt: 1000, attempts: 1 }]);
        expect(await orThrow(store.redeliverNotifications([one[0]!.guid, 'none']))).toBe(1);
        expect((await orThrow(store.leaseNotifications('five', 10, 500))).map((n) => n.guid)).toEqual([one[0]!.guid]);
        expect(await orThrow(store.notificationCounts())).toMatchObject({ pending: 3, delivered: 0 });
      });

      it('a purge takes a transfer\'s notifications with its response', async () => {
        let now = 1000;
        const store = await open(await fresh(), { clock: () => now });
        await unknownRow(store, 'p');
        await orThrow(store.execute('p', processed));
        now = 10_000;
        await orThrow(store.execute('p', { type: 'Purge', retentionMs: 1000 }));
        expect(await orThrow(store.listNotifications({ limit: 10 }))).toEqual([]);
      });
    });

    describe('reconciliation runs', () => {
      const tmp = useTempDir();
      const W = { from: 1000, to: 2000, pendingMs: 0 };
      const W2 = { from: 2000, to: 3000, pendingMs: 0 };
      const BIG = 2n ** 53n + 1n;
      const firstSeen = (r: { breaks: readonly { guid: string; firstSeen: string | null }[] }) => Object.fromEntries(r.breaks.map((b) => [b.guid, b.firstSeen]));

      it('a run is recorded with its window, source, SHA-256, counts, money and breaks (amounts exact), and read back as it was recorded', async () => {
        const store = await open(await fresh());
        const run = await runOver(tmp(), [sentRecord('a', 1100), sentRecord('b', 1200, 'DONE', '0000', { amount: Number(BIG) }), sentRecord('m', 1300)], [
          { guid: 'b', appliedAt: 1210, amount: BIG },
          { guid: 'b', appliedAt: 1220, amount: BIG },
          { guid: 'c', appliedAt: 1400, currency: null },
          { guid: 'm', appliedAt: 1310 },
        ], W);
        expect(run.breaks.map((b) => [b.guid, b.category])).toEqual([['a', 'missing_in_journal'], ['b', 'duplicate_in_journal'], ['c', 'missing_in_ledger']]);
        const recorded = await orThrow(store.recordReconciliation(run));
        expect(recorded.summary).toEqual(run.summary);
        expect(firstSeen(recorded)).toEqual({ a: recorded.id, b: recorded.id, c: recorded.id });
        const read = await orThrow(store.reconciliation(recorded.id));
        expect(read).toEqual(recorded);
        expect(read!.breaks[1]!.journal.map((e) => e.amount)).toEqual([BIG, BIG]);
        expect(read!.summary.money.duplicate_in_journal.journal.get('CNY')).toBe(BIG * 2n);
        expect(read!.summary.sha256).toMatch(/^[0-9a-f]{64}$/);
        expect(await orThrow(store.reconciliations({ limit: 10 }))).toEqual([{ id: recorded.id, recordedAt: recorded.recordedAt, summary: run.summary }]);
        expect(await orThrow(store.reconciliation('999999'))).toBeNull();
        expect(await orThrow(store.reconciliation('not-an-id'))).toBeNull();
      });

      it('first seen: a break still open in a later run over its transfers keeps the run that first saw it; one gone in between starts again; a run over other days changes neither', async () => {
        const store = await open(await fresh());
        const dir = tmp();
        const record = async (r: ReconcileResult) => orThrow(store.recordReconciliation(r));
        const dup = [{ guid: 'b', appliedAt: 1210 }, { guid: 'b', appliedAt: 1220 }];
        const r1 = await record(await runOver(dir, [sentRecord('a', 1100), sentRecord('b', 1200)], [...dup, { guid: 'c', appliedAt: 1300 }], W));
        // Run again over the same day: a still missing, b's second posting reversed, c still unknown, d new.
        const r2 = await record(await runOver(dir, [sentRecord('a', 1100), sentRecord('b', 1200), sentRecord('d', 1500, 'FAILED', null)], [dup[0]!, { guid: 'c', appliedAt: 1300 }, { guid: 'd', appliedAt: 1510 }], W));
        expect(firstSeen(r2)).toEqual({ a: r1.id, c: r1.id, d: r2.id });
        // The next day: other transfers.
        const r3 = await record(await runOver(dir, [sentRecord('e', 2100)], [], W2));
        expect(firstSeen(r3)).toEqual({ e: r3.id });
        // The first day once more: a still open since r1, b broken again (gone in r2: not carried), d now another category.
        const r4 = await record(await runOver(dir, [sentRecord('a', 1100), sentRecord('b', 1200), sentRecord('d', 1500, 'DONE', 'B201')], [...dup, { guid: 'c', appliedAt: 1300 }, { guid: 'd', appliedAt: 1510 }], W));
        expect(r4.breaks.find((b) => b.guid === 'd')?.category).toBe('rejected_in_ledger');
        expect(firstSeen(r4)).toEqual({ a: r1.id, b: r4.id, c: r1.id, d: r4.id });
        expect(firstSeen((await orThrow(store.reconciliation(r4.id)))!)).toEqual(firstSeen(r4));

        const history = await orThrow(store.reconciliationBreaks('a'));
        expect(history.map((h) => [h.run.id, h.break.category, h.break.firstSeen])).toEqual([r1, r2, r4].map((r) => [r.id, 'missing_in_journal', r1.id]));
        expect((await orThrow(store.reconciliationBreaks('d'))).map((h) => h.break.category)).toEqual(['unsettled_in_ledger', 'rejected_in_ledger']);
        expect(await orThrow(store.reconciliationBreaks('m'))).toEqual([]);

        // Newest first, paged by id.
        expect((await orThrow(store.reconciliations({ limit: 10 }))).map((r) => r.id)).toEqual([r4, r3, r2, r1].map((r) => r.id));
        expect((await orThrow(store.reconciliations({ limit: 2 }))).map((r) => r.id)).toEqual([r4.id, r3.id]);
        expect((await orThrow(store.reconciliations({ limit: 10, beforeId: r3.id }))).map((r) => r.id)).toEqual([r2.id, r1.id]);
      });

      it('runs recorded at once from two stores on one ledger: one after the other, the later one seeing the earlier one\'s breaks', async () => {
        const f = await fresh();
        const [one, two] = [await open(f), await open(f)];
        const dir = tmp();
        const records = Array.from({ length: 50 }, (_, i) => sentRecord(`g-${String(i).padStart(2, '0')}`, 1100 + i));
        const run = await runOver(dir, records, [], W);
        for (let round = 0; round < 3; round++) {
          const [a, b] = await Promise.all([orThrow(one.recordReconciliation(run)), orThrow(two.recordReconciliation(run))]);
          const [earlier, later] = Number(a.id) < Number(b.id) ? [a, b] : [b, a];
          const first = (await orThrow(one.reconciliation(later.id)))!.breaks.map((x) => x.firstSeen);
          expect(new Set(first)).toEqual(new Set([round === 0 ? earlier.id : (await orThrow(one.reconciliation(earlier.id)))!.breaks[0]!.firstSeen]));
          expect(first).toHaveLength(50);
        }
        // Six runs, every break first seen in the first of them.
        const all = await orThrow(one.reconciliations({ limit: 10 }));
        expect(all).toHaveLength(6);
        expect((await orThrow(one.reconciliationBreaks('g-07'))).map((h) => h.break.firstSeen)).toEqual(Array(6).fill(all[5]!.id));
      });

      it('a malformed run is refused before anything of it is written: a Left, no run, no break', async () => {
        const store = await open(await fresh());
        const run = await runOver(tmp(), [sentRecord('a', 1100)], [], W);
        await expectLeft(store.recordReconciliation({ ...run, summary: { ...run.summary, sha256: 'not a digest' } }), 'LEDGER_UNAVAILABLE', /sha256/);
        await expectLeft(store.recordReconciliation({ ...run, breaks: [...run.breaks, run.breaks[0]!] }), 'LEDGER_UNAVAILABLE', /two breaks/);
        expect(await orThrow(store.reconciliations({ limit: 10 }))).toEqual([]);
        expect(await orThrow(store.reconciliationBreaks('a'))).toEqual([]);
        // The store is fine after it.
        const recorded = await orThrow(store.recordReconciliation(run));
        expect((await orThrow(store.reconciliationBreaks('a'))).map((h) => h.run.id)).toEqual([recorded.id]);
        });
      });

    describe('continuity (CONTRACT.md §9)', () => {
      it('the standing names the server and how far the log reaches; missingEvents names exactly the events the log lacks', async () => {
        const f = await fresh();
        const store = await open(f);
        const before = await orThrow(store.ledgerStanding());
        await orThrow(store.execute('a', submit()));
        await orThrow(store.execute('b', submit()));
        const after = await orThrow(store.ledgerStanding());
        expect(after.server).toBe(before.server);
        expect(after.instance).toBe(before.instance);
        expect(after.position).toBeGreaterThanOrEqual(before.position + 4);
        const missing = await orThrow(store.missingEvents([{ guid: 'a', seq: 0 }, { guid: 'a', seq: 1 }, { guid: 'a', seq: 2 }, { guid: 'zz', seq: 0 }, { guid: 'b', seq: 1 }]));
        expect(missing).toEqual([{ guid: 'a', seq: 2 }, { guid: 'zz', seq: 0 }]);
        expect(await orThrow(store.missingEvents([]))).toEqual([]);
      });

      it('a mark written is read back by the next opening, the ledger judged where it says, its window with why it opened and the standing it was judged on', async () => {
        const f = await fresh();
        const store = await open(f);
        await orThrow(store.execute('a', submit()));
        const { position } = await orThrow(store.ledgerStanding());
        // The server is recorded where another can answer (PostgreSQL); a file's mark names the event instead.
        const server = f.db.startsWith('postgres') ? { server: 'S1' } : {};
        const mark = {
          position, at: 1_700_000_000_000, ...server,
          window: { wentBackAt: 1_700_000_000_000, endsAt: 1_700_003_600_000, why: 'a test', seen: { position } },
        };
        await orThrow(store.writeMark(mark));
        const again = await open(f);
        expect(await orThrow(again.readMark())).toEqual(mark);
      });

      it('a mark is never moved back by another writer: the highest position stays, an open window is kept by a mark without one', async () => {
        const f = await fresh();
        // Several relays write one PostgreSQL ledger's mark; a file's mark is judged against its event
        // (test/int/continuityMark.int.spec.ts).
        if (!f.db.startsWith('postgres')) return;
        const store = await open(f);
        const window = { wentBackAt: 1_700_000_000_000, endsAt: 1_700_003_600_000 };
        await orThrow(store.writeMark({ position: 9, at: 1_700_000_000_000, server: 'S1', window }));
        await orThrow(store.writeMark({ position: 4, at: 1_700_000_001_000, server: 'S2' }));
        const read = await orThrow(store.readMark());
        expect(read).toEqual({ position: 9, at: 1_700_000_001_000, server: 'S2', window });
      });
    });

    describe('lifecycle', () => {
      it('ping answers while open; close (twice at once) writes what was submitted first; after it every call is LEDGER_CLOSED', async () => {
        const f = await fresh();
        const store = await f.open();
        expect(await store.ping()).toEqual(E.right(undefined));
        const pending = orThrow(store.execute('a', submit()));
        expect(await Promise.all([store.close(), store.close()])).toEqual([E.right(undefined), E.right(undefined)]);
        expect((await pending).kind).toBe('applied');
        await expectLeft(store.ping(), 'LEDGER_CLOSED');
        await expectLeft(store.getLedger('a'), 'LEDGER_CLOSED');
        await expectLeft(store.execute('b', submit()), 'LEDGER_CLOSED');
        // What was acknowledged before the close is there when it opens again.
        expect((await orThrow((await open(f)).getLedger('a')))?.status).toBe('SENT');
      });

      it('a ledger from a newer guidgate is refused at open, with the reason', async () => {
        const f = await fresh();
        await (await open(f)).close();
        stores.length = 0;
        await f.backdoor.markSchemaNewer();
        await expect(f.open()).rejects.toThrow(/newer than this guidgate/);
      });

      it('a store never rejects: every method of a closed store resolves to a Left with LEDGER_CLOSED', async () => {
        const f = await fresh();
        const store = await f.open();
        expect(await store.close()).toEqual(E.right(undefined));
        const calls: Record<Exclude<keyof EventStore, 'close' | 'connectionEvents'>, () => Promise<unknown>> = {
          appendEvents: () => store.appendEvents('a', -1, [claimed(1)]),
          execute: () => store.execute('a', submit()),
          readStream: () => store.readStream('a'),
          readAll: () => store.readAll(0, 10),
          getLedger: () => store.getLedger('a'),
          queryLedger: () => store.queryLedger({}),
          countLedger: () => store.countLedger({}),
          countByStatus: () => store.countByStatus(),
          removeTombstones: () => store.removeTombstones(1),
          spaceOnDisk: () => store.spaceOnDisk(),
          reclaimSpace: () => store.reclaimSpace(),
          rebuildProjection: () => store.rebuildProjection(),
          verifyProjection: () => store.verifyProjection(),
          recordUnclearInquiry: () => store.recordUnclearInquiry('a', 1, 2, 100),
          leaseRows: () => store.leaseRows('h', [{ guid: 'a', lastSeq: 1 }], 1000),
          releaseLeases: () => store.releaseLeases('h'),
          now: () => store.now(),
          recordRequests: () => store.recordRequests([{ guid: 'a', at: 1, key: null, code: '0000', fingerprintMatch: true }]),
          readRequests: () => store.readRequests('a'),
          recordKeyUses: () => store.recordKeyUses([{ key: 'ops', at: 1 }]),
          keyUses: () => store.keyUses(),
          recordReconciliation: () => store.recordReconciliation({ summary: {} as never, breaks: [] }),
          reconciliations: () => store.reconciliations({ limit: 1 }),
          reconciliation: () => store.reconciliation('1'),
          reconciliationBreaks: () => store.reconciliationBreaks('a'),
          ledgerStanding: () => store.ledgerStanding(),
          missingEvents: () => store.missingEvents([{ guid: 'a', seq: 0 }]),
          readMark: () => store.readMark(),
          leaseNotifications: () => store.leaseNotifications('h', 10, 1000),
          recordDeliveries: () => store.recordDeliveries([{ guid: 'a', seq: 1, at: 1, result: 'delivered', httpStatus: 200, detail: '', latencyMs: 1, nextAt: null, holder: 'h' }]),
          redeliverNotifications: () => store.redeliverNotifications(['a']),
          listNotifications: () => store.listNotifications({ limit: 1 }),
          notificationAttempts: () => store.notificationAttempts('a'),
          notificationCounts: () => store.notificationCounts(),
          writeMark: () => store.writeMark({ position: 1, at: 1 }),
          // Only a store that can judge a server change has it (PostgreSQL); where it is, closed is closed too.
          judgeServerChange: () => store.judgeServerChange?.({ relay: 'r', before: 'pg:1/timeline 1', now: 'pg:1/timeline 2', hasOwn: true, ownLost: null }) ?? store.ping(),
          ping: () => store.ping(),
          // Only a store with standbys has it (PostgreSQL); where it is, closed is closed too.
          durability: () => store.durability?.() ?? store.ping(),
        };
        const settled = await Promise.allSettled(Object.values(calls).map((call) => call()));
        expect(settled.map((s) => s.status)).toEqual(Object.keys(calls).map(() => 'fulfilled'));
        for (const s of settled) if (s.status === 'fulfilled') expect(s.value).toMatchObject({ _tag: 'Left', left: { code: 'LEDGER_CLOSED' } });
      });
    });
  });
}
