/** The test suite's one cleanup helper (test/support/cleanup.ts): what every test relies on to leave nothing behind. */
import { describe, expect, it } from 'vitest';
import { cleanupOf, closeAll, type Closer } from '../support/cleanup.js';

describe('cleanup', () => {
  it('closes in reverse order of registration, every closer even when some throw, then fails with their errors', async () => {
    const closers: Closer[] = [];
    const cleanup = cleanupOf(closers);
    const closed: string[] = [];
    cleanup.add(() => closed.push('first'));
    cleanup.add(() => {
      closed.push('throws');
      throw new Error('a closer failed');
    });
    cleanup.use({ close: async () => void closed.push('resource') });
    await expect(closeAll(closers)).rejects.toThrow('a closer failed');
    expect(closed).toEqual(['resource', 'throws', 'first']);
    expect(closers).toEqual([]);

    cleanup.add(() => Promise.reject(new Error('one')));
    cleanup.add(() => Promise.reject(new Error('two')));
    const both = await closeAll(closers).catch((err: unknown) => err);
    expect(both).toBeInstanceOf(AggregateError);
    expect((both as AggregateError).errors.map((e: Error) => e.message)).toEqual(['two', 'one']);
  });

  it('a closer run early by the test is not run again', async () => {
    const closers: Closer[] = [];
    const cleanup = cleanupOf(closers);
    let runs = 0;
    const closeNow = cleanup.add(() => void runs++);
    cleanup.add(() => undefined);
    await closeNow();
    await closeNow();
    await closeAll(closers);
    expect(runs).toBe(1);
  });
});
