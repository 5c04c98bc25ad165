import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventStore, RequestRecord } from '../../src/events/store.js';
import { createRequestRecorder } from '../../src/relay/requestRecorder.js';
import { openSqliteStore } from '../../src/store/sqlite/sqliteStore.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

/** The request recorder on a real SQLite ledger: records are buffered and written in batches, within a bound. */
describe('request recorder', () => {
  const tmp = useTempDir();
  const stores: EventStore[] = [];
  afterEach(async () => {
    while (stores.length) await stores.pop()!.close();
  });

  /** A real store whose writes of request records are counted (and can be made to fail). */
  const ledger = () => {
    const store = openSqliteStore({ path: join(tmp(), 'ledger.db') });
    stores.push(store);
    const writes: number[] = [];
    let failing = false;
    const log = {
      recordRequests: (records: readonly RequestRecord[]) => {
        writes.push(records.length);
        return failing ? Promise.reject(new Error('disk full')) : store.recordRequests(records);
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
    expect((await store.readRequests('G')).map((r) => r.at)).toEqual(Array.from({ length: 100 }, (_, i) => 1000 + i));
  });

  it('writes at once when flushRecords are buffered; flush() writes the rest', async () => {
    const { store, log, writes } = ledger();
    const recorder = createRequestRecorder({ store: log, flushMs: 60_000, flushRecords: 10 });
    for (let i = 0; i < 25; i++) recorder.record(rec(i));
    await waitFor(() => writes.length > 0, { what: 'the write at the count' });
    await recorder.flush();
    expect(writes.reduce((a, b) => a + b, 0)).toBe(25);
    expect(writes[0]).toBe(10);
    expect(await store.readRequests('G')).toHaveLength(25);
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
    expect((await store.readRequests('G')).map((r) => r.at)).toEqual([1003, 1004, 1005, 1006, 1007]);
    expect(losses.reduce((a, b) => a + b, 0)).toBe(3);
  });
});
