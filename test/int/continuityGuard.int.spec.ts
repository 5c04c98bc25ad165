/**
 * The continuity guard's judgement (src/send/continuityGuard.ts, CONTRACT.md §9) on a real SQLite ledger whose
 * standing is told to change as a server's would: a restart of the same server with every recently acknowledged
 * event present is no going back; a restart that lost one is; another server or timeline is; a file behind the mark
 * beside it is. The failover and restore themselves, with real servers: test/e2e/continuity*.e2e.spec.ts.
 */
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import type { Command } from '../../src/events/decide.js';
import type { EventStore, LedgerStanding } from '../../src/events/store.js';
import { orThrow } from '../../src/events/storeResult.js';
import { startContinuityGuard, type ContinuityGuard } from '../../src/send/continuityGuard.js';
import { openLedger } from '../support/ledgerStore.js';
import { createAccountClient } from '../../src/account/accountClient.js';
import { relayTransfer } from '../../src/relay/relayTransfer.js';
import { startSimulator } from '../../src/simulator/index.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';

const submit = (guid: string): Command => ({ type: 'Submit', request: `{"guid":"${guid}"}`, fingerprint: guid, timeoutMs: 1000, maxAttempts: 3 });

describe('the continuity guard on a real ledger', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  /** A SQLite store whose standing says what `as` says (a server's identity), its position the file's own. */
  async function guarded(windowMs = 3_600_000, path = join(tmp(), 'l.db')) {
    const inner = cleanup.use(openLedger(path));
    const as = { server: 'pg:1/timeline 1', instance: 'h:5432@1' };
    const store: EventStore = {
      ...inner,
      ledgerStanding: async () => E.map((s: LedgerStanding) => ({ ...s, ...as, canChange: true }))(await inner.ledgerStanding()),
    };
    const lines: string[] = [];
    let breaks = 0;
    const log = { warn: (_l: Record<string, unknown>, m: string) => void lines.push(m), error: (_l: Record<string, unknown>, m: string) => void lines.push(m) };
    const guard: ContinuityGuard = await orThrow(startContinuityGuard(store, log, { continuityBreak: () => void breaks++ }, { windowMs, checkEveryMs: 60_000 }));
    cleanup.add(() => guard.stop());
    return { inner, as, guard, lines, breaks: () => breaks, path };
  }

  it('a restart of the same server (another start time) with every recent event present: no going back, said in the log', async () => {
    const g = await guarded();
    for (const guid of ['a', 'b', 'c']) await orThrow(g.guard.store.execute(guid, submit(guid)));
    g.as.instance = 'h:5432@2';
    await orThrow(g.guard.check());
    expect(g.breaks()).toBe(0);
    expect(g.guard.view()).toMatchObject({ state: 'watching', breaks: 0 });
    expect(await orThrow(g.guard.beforeFirstClaim())).toMatchObject({ window: null });
    expect(g.lines.join('\n')).toMatch(/restarted or another host answers; every recently acknowledged event is there: no going back/);
  });

  it('a restart that lost a recently acknowledged event: the ledger went back, the window opens', async () => {
    const g = await guarded();
    for (const guid of ['a', 'b']) await orThrow(g.guard.store.execute(guid, submit(guid)));
    g.inner.db.prepare("DELETE FROM events WHERE guid = 'b'").run();
    g.as.instance = 'h:5432@2';
    await orThrow(g.guard.check());
    expect(g.breaks()).toBe(1);
    expect(g.guard.view()).toMatchObject({ state: 'window', breaks: 1 });
    expect((await orThrow(g.guard.beforeFirstClaim())).window).not.toBeNull();
    expect(g.lines.join('\n')).toMatch(/the ledger went back \(1 of this relay's 2 most recently acknowledged events are missing\)/);
  });

  it('another timeline under the connection: the ledger went back, once', async () => {
    const g = await guarded();
    g.as.server = 'pg:1/timeline 2';
    await orThrow(g.guard.check());
    await orThrow(g.guard.check());
    expect(g.breaks()).toBe(1);
    expect(g.guard.view()).toMatchObject({ state: 'window' });
  });

  it('--continuity-window 0: the going back is counted and logged, no window, claims sent as usual', async () => {
    const g = await guarded(0);
    g.as.server = 'pg:1/timeline 2';
    await orThrow(g.guard.check());
    expect(g.breaks()).toBe(1);
    expect(g.guard.view()).toMatchObject({ state: 'off', breaks: 1 });
    const gate = await orThrow(g.guard.beforeFirstClaim());
    expect(gate.window).toBeNull();
    expect(await g.guard.afterFirstClaim(gate)).toBe(true);
  });

  it('a claim let through before the going back was seen is not sent (afterFirstClaim false)', async () => {
    const g = await guarded();
    const gate = await orThrow(g.guard.beforeFirstClaim());
    g.as.server = 'pg:1/timeline 2';
    await orThrow(g.guard.check());
    expect(await g.guard.afterFirstClaim(gate)).toBe(false);
  });

  it('SQLite: a file behind its mark (an older copy put back) is a going back at start; a restart inside the window keeps it', async () => {
    const path = join(tmp(), 'm.db');
    const first = await guarded(3_600_000, path);
    await orThrow(first.guard.store.execute('a', submit('a')));
    await first.guard.stop();
    const mark = await orThrow(first.inner.readMark());
    expect(mark?.position).toBeGreaterThanOrEqual(2);
    // The log behind the mark: as a copy taken before 'b' was claimed would be.
    await orThrow(first.inner.writeMark({ position: (mark?.position ?? 0) + 5, at: Date.now() }));
    await first.inner.close();
    const second = await guarded(3_600_000, path);
    expect(second.breaks()).toBe(1);
    expect(second.guard.view()).toMatchObject({ state: 'window' });
    expect(second.lines.join('\n')).toMatch(/behind its continuity mark/);
    await second.guard.stop();
    await second.inner.close();
    const third = await guarded(3_600_000, path);
    expect(third.breaks()).toBe(0);
    expect(third.guard.view()).toMatchObject({ state: 'window' });
  });

  it('inside the window, a claim the inquiry cleared is still not sent when the ledger went back again after it (found in review: a second failover between the inquiry and the claim)', async () => {
    const g = await guarded();
    g.as.server = 'pg:1/timeline 2';
    await orThrow(g.guard.check());
    expect(g.guard.view()).toMatchObject({ state: 'window', breaks: 1 });
    const sim = cleanup.use(await startSimulator({ port: 0 }));
    const account = cleanup.use(createAccountClient({ baseUrl: sim.url, timeoutMs: 2000 }));
    // The claim commits, then the server changes again (another promotion) and the guard's timer sees it before the send.
    const store: EventStore = {
      ...g.guard.store,
      execute: async (...args: Parameters<EventStore['execute']>) => {
        const result = await g.guard.store.execute(...args);
        g.as.server = 'pg:1/timeline 3';
        await orThrow(g.guard.check());
        return result;
      },
    };
    const deps = { store, account, metrics: createMetrics(store, Date.now), timeoutMs: 2000, maxAttempts: 3, minAgeMs: 0, graceMs: 60_000, continuity: g.guard };
    const r = await relayTransfer(deps, Buffer.from(JSON.stringify({ guid: 'W-1', from: 'ACC-1', to: 'ACC-2', amount: 5 })), undefined);
    expect([r.reply.code, r.decision]).toEqual(['E901', 'withheld']);
    expect(sim.guidStats('W-1').calls).toBe(0);
    expect(g.breaks()).toBe(2);
    expect(await orThrow(g.inner.getLedger('W-1'))).toMatchObject({ status: 'SENT' });
  });
});
