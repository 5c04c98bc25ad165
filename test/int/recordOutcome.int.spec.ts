import { join } from 'node:path';
import { describe, it, expect } from 'vitest';
import { openSqliteStore } from '../../src/store/sqlite/sqliteStore.js';
import { recordOutcome } from '../../src/relay/recordOutcome.js';
import { sweepOrphans } from '../../src/relay/sweepOrphans.js';
import { useTempDir } from '../support/tmp.js';

const submit = { type: 'Submit', request: '{"guid":"L"}', fingerprint: 'f', timeoutMs: 1000, maxAttempts: 3 } as const;
const answer = { kind: 'definite', code: '0000', body: '{"code":"0000","late":true}', status: 200, latencyMs: 9000 } as const;

describe('recording an outcome against a row that moved', () => {
  const tmp = useTempDir();

  it('an answer that arrives after the sweep made the row UNKNOWN is recorded as Resolved late-answer, not dropped', async () => {
    let now = 1000;
    const store = openSqliteStore({ path: join(tmp(), 'l.db'), clock: () => now });
    await store.execute('L', submit);
    now = 1000 + 1000 + 500;
    expect(await sweepOrphans(store, 500, now)).toEqual({ neverSent: 0, orphaned: 1 });
    const r = await recordOutcome(store, 'L', 1, answer);
    expect(r).toMatchObject({ recorded: true, state: { status: 'DONE', code: '0000', response: answer.body } });
    expect((await store.readStream('L')).map((e) => e.type)).toEqual(['Claimed', 'Sent', 'TimedOut', 'Resolved']);
    expect((await store.readStream('L')).at(-1)?.data).toMatchObject({ source: 'late-answer' });
    await store.close();
  });

  it('the sweep leaves a SENT row alone until its own timeout plus the grace has passed', async () => {
    let now = 1000;
    const store = openSqliteStore({ path: join(tmp(), 'l.db'), clock: () => now });
    await store.execute('L', submit);
    now = 2499;
    expect(await sweepOrphans(store, 500, now)).toEqual({ neverSent: 0, orphaned: 0 });
    const r = await recordOutcome(store, 'L', 1, answer);
    expect(r).toMatchObject({ recorded: true, state: { status: 'DONE' } });
    expect((await store.readStream('L')).map((e) => e.type)).toEqual(['Claimed', 'Sent', 'Answered']);
    await store.close();
  });

  it('a timeout for a row the sweep already settled changes nothing', async () => {
    let now = 1000;
    const store = openSqliteStore({ path: join(tmp(), 'l.db'), clock: () => now });
    await store.execute('L', submit);
    now = 10_000;
    await sweepOrphans(store, 500, now);
    const r = await recordOutcome(store, 'L', 1, { kind: 'unknown', reason: 'timeout', detail: 'x', latencyMs: 1 });
    expect(r).toMatchObject({ recorded: false, state: { status: 'UNKNOWN' } });
    expect(await store.readStream('L')).toHaveLength(3);
    await store.close();
  });

  it('a ledger that cannot be written comes back as an error value (the caller answers E901)', async () => {
    const store = openSqliteStore({ path: join(tmp(), 'l.db') });
    await store.execute('L', submit);
    await store.close();
    const r = await recordOutcome(store, 'L', 1, answer);
    expect(r.recorded).toBe('error');
  });
});
