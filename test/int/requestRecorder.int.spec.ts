import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { LedgerUnavailableError } from '../../src/events/errors.js';
import type { EventStore, RequestRecord } from '../../src/events/store.js';
import { orThrow } from '../../src/events/storeResult.js';
import { createAccountClient } from '../../src/account/accountClient.js';
import { buildApp } from '../../src/relay/app.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { createRequestRecorder } from '../../src/relay/requestRecorder.js';
import { startSimulator } from '../../src/simulator/index.js';
import { openLedger } from '../support/ledgerStore.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';
import { sleep, waitFor } from '../support/waitFor.js';

/** The request recorder on a real SQLite ledger: records are buffered and written in batches, within a bound. */
describe('request recorder', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  /** A real store whose writes of request records are counted (and can be made to fail). */
  const ledger = () => {
    const store: EventStore = cleanup.use(openLedger(join(tmp(), 'ledger.db')));
    const writes: number[] = [];
    let failing = false;
    const log = {
      recordRequests: (records: readonly RequestRecord[]) => {
        writes.push(records.length);
        return failing ? Promise.resolve(E.left(new LedgerUnavailableError('disk full'))) : store.recordRequests(records);
      },
      readRequests: (guid: string) => store.readRequests(guid),
    };
    return { store, log, writes, fail: (on: boolean) => (failing = on) };
  };
  const rec = (i: number, guid = 'G'): RequestRecord => ({ guid, at: 1000 + i, key: null, code: '0000', fingerprintMatch: true });

  it('buffers and writes once per interval: 100 records in one turn are one write, none before the timer', async () => {
    const { store, log, writes } = ledger();
    const recorder = createRequestRecorder({ store: log, flushMs: 50, flushRecords: 1000 });
    for (let i = 0; i < 100; i++) recorder.record(rec(i));
    expect(writes).toEqual([]);
    await waitFor(() => writes.length > 0, { what: 'the timed write' });
    await recorder.flush();
    expect(writes).toEqual([100]);
    expect((await orThrow(store.readRequests('G'))).map((r) => r.at)).toEqual(Array.from({ length: 100 }, (_, i) => 1000 + i));
  });

  it('writes at once when flushRecords are buffered; flush() writes the rest', async () => {
    const { store, log, writes } = ledger();
    const recorder = createRequestRecorder({ store: log, flushMs: 60_000, flushRecords: 10 });
    for (let i = 0; i < 25; i++) recorder.record(rec(i));
    await waitFor(() => writes.length > 0, { what: 'the write at the count' });
    await recorder.flush();
    expect(writes.reduce((a, b) => a + b, 0)).toBe(25);
    expect(writes[0]).toBe(10);
    expect(await orThrow(store.readRequests('G'))).toHaveLength(25);
    expect(recorder.dropped()).toBe(0);
  });

  it('a ledger refusing writes: records are kept for the next write up to the bound, the oldest go beyond it (counted)', async () => {
    const { store, log, fail } = ledger();
    const losses: number[] = [];
    const recorder = createRequestRecorder({ store: log, flushMs: 60_000, flushRecords: 1_000_000, maxBuffered: 5, onLoss: (n) => losses.push(n) });
    fail(true);
    for (let i = 0; i < 3; i++) recorder.record(rec(i));
    await recorder.flush();
    expect(recorder.dropped()).toBe(0);
    for (let i = 3; i < 8; i++) recorder.record(rec(i));
    expect(recorder.dropped()).toBe(3);
    fail(false);
    await recorder.flush();
    expect((await orThrow(store.readRequests('G'))).map((r) => r.at)).toEqual([1003, 1004, 1005, 1006, 1007]);
    expect(losses.reduce((a, b) => a + b, 0)).toBe(3);
    // Closing while the ledger refuses: what is left is lost, and counted.
    fail(true);
    recorder.record(rec(8));
    recorder.record(rec(9));
    await recorder.close();
    expect(recorder.dropped()).toBe(5);
    expect(losses.reduce((a, b) => a + b, 0)).toBe(5);
  });

  it('a ledger failing at once with a full batch buffered is retried by a backing-off timer, never in a loop that starves the event loop (found in review)', async () => {
    const { log, writes, fail } = ledger();
    const recorder = createRequestRecorder({ store: log, flushMs: 20, flushRecords: 2, maxBuffered: 100 });
    fail(true);
    for (let i = 0; i < 5; i++) recorder.record(rec(i));
    // Time is the point here: over 150 ms, retries 20, 40, 80 ms apart are a handful of writes, a loop hundreds.
    // (Before the fix each failed write started the next one as a microtask: this timer never fired.)
    await sleep(150);
    expect(writes.length).toBeLessThanOrEqual(5);
    await waitFor(() => writes.length >= 2, { what: 'a retry after the write at the count' });
    fail(false);
    await recorder.flush();
    expect(recorder.dropped()).toBe(0);
  });

  it('closing the relay writes what is still buffered, after the last reply and before the ledger closes', async () => {
    const { store } = ledger();
    const sim = await startSimulator({ port: 0, host: '127.0.0.1' });
    const account = createAccountClient({ baseUrl: sim.url, timeoutMs: 1000 });
    // A timer that never fires in this test: only the close can write the records.
    const requests = createRequestRecorder({ store, flushMs: 3_600_000, flushRecords: 1_000_000 });
    const app = buildApp({ store, account, metrics: createMetrics(store, Date.now), timeoutMs: 1000, maxAttempts: 3, requests });
    try {
      const body = JSON.stringify({ guid: 'CLOSE-1', from: 'ACC-1', to: 'ACC-2', amount: 5 });
      const post = () => app.inject({ method: 'POST', url: '/v1/transfers', headers: { 'content-type': 'application/json' }, payload: body });
      expect((await post()).json()['code']).toBe('0000');
      expect((await post()).json()['code']).toBe('0000');
      expect(await orThrow(store.readRequests('CLOSE-1'))).toEqual([]);
    } finally {
      await app.close();
      await account.close();
      await sim.close();
    }
    expect((await orThrow(store.readRequests('CLOSE-1'))).map((r) => [r.code, r.key, r.fingerprintMatch])).toEqual([['0000', null, true], ['0000', null, true]]);
  });
});
