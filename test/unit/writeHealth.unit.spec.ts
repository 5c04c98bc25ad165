import { describe, expect, it } from 'vitest';
import { LedgerClosedError, LedgerCorruptError, LedgerUnavailableError } from '../../src/events/errors.js';
import { writeHealth } from '../../src/store/shared/writeHealth.js';

/** A probe the test settles by hand, counting its runs; a clock the test moves. */
function harness() {
  let now = 0;
  let runs = 0;
  let settle: { ok(): void; fail(err: unknown): void } | null = null;
  const probe = () => {
    runs++;
    return new Promise<void>((ok, fail) => (settle = { ok, fail }));
  };
  const health = writeHealth(probe, { freshMs: 1000, clock: () => now });
  const outcome = async (p: Promise<void>) => p.then(() => 'ok', (err: unknown) => (err instanceof LedgerUnavailableError ? err.message : `other: ${String(err)}`));
  const flush = () => new Promise((r) => setImmediate(r));
  return {
    health,
    runs: () => runs,
    settle: () => settle!,
    tick: (ms: number) => (now += ms),
    outcome,
    flush,
  };
}

describe('writeHealth: the ping judged by what writes meet', () => {
  it('with no evidence it probes; concurrent checks share one probe; its outcome stands for freshMs, then it probes again', async () => {
    const h = harness();
    const a = h.outcome(h.health.check());
    const b = h.outcome(h.health.check());
    await h.flush();
    expect(h.runs()).toBe(1);
    h.settle().ok();
    expect([await a, await b]).toEqual(['ok', 'ok']);
    h.tick(999);
    expect(await h.outcome(h.health.check())).toBe('ok');
    expect(h.runs()).toBe(1);
    h.tick(1);
    const c = h.outcome(h.health.check());
    await h.flush();
    expect(h.runs()).toBe(2);
    h.settle().fail(new LedgerUnavailableError('ledger write failed: database or disk is full'));
    expect(await c).toBe('ledger write failed: database or disk is full');
  });

  it('a write that just failed for the ledger makes it unhealthy at once, a fresh success before it notwithstanding; the next write that goes through makes it healthy', async () => {
    const h = harness();
    await h.health.watch(Promise.resolve('written'));
    await h.flush();
    expect(await h.outcome(h.health.check())).toBe('ok');
    await h.health.watch(Promise.reject(new LedgerUnavailableError('ledger write failed: database or disk is full'))).catch(() => undefined);
    await h.flush();
    expect(await h.outcome(h.health.check())).toBe('ledger write failed: database or disk is full');
    await h.health.watch(Promise.resolve('written'));
    await h.flush();
    expect(await h.outcome(h.health.check())).toBe('ok');
    expect(h.runs()).toBe(0);
  });

  it("a unit's own problem (a row that does not decode, a plain error) and the store's own closing are not evidence about the ledger", async () => {
    const h = harness();
    await h.health.watch(Promise.resolve('written'));
    for (const err of [new LedgerCorruptError('row does not decode'), new Error('impossible event'), new LedgerClosedError()]) {
      await h.health.watch(Promise.reject(err)).catch(() => undefined);
    }
    await h.flush();
    expect(await h.outcome(h.health.check())).toBe('ok');
  });

  it('watch gives the write back unchanged, its rejection included', async () => {
    const h = harness();
    await expect(h.health.watch(Promise.resolve(42))).resolves.toBe(42);
    const err = new LedgerUnavailableError('locked');
    await expect(h.health.watch(Promise.reject(err))).rejects.toBe(err);
  });
});
