import { afterAll, afterEach } from 'vitest';

export type Closer = () => unknown;

export interface Cleanup {
  /**
   * Registers `close`; returns a function that runs it at once instead (for a resource the test itself ends
   * midway, such as a relay it restarts), after which it is not run again.
   */
  add(close: Closer): () => Promise<void>;
  /** Registers `resource.close()` and returns the resource. */
  use<T extends { close(): unknown }>(resource: T): T;
}

/**
 * What a test opens, closed after it (`'test'`, the default: afterEach) or after the file (`'file'`: afterAll),
 * in reverse order of registration, every closer even when an earlier one throws.
 */
export function useCleanup(scope: 'test' | 'file' = 'test'): Cleanup {
  const closers: Closer[] = [];
  (scope === 'test' ? afterEach : afterAll)(() => closeAll(closers));
  return cleanupOf(closers);
}

/** The registry behind `useCleanup`, over `closers` (exported for its own test). */
export function cleanupOf(closers: Closer[]): Cleanup {
  const add = (close: Closer) => {
    closers.push(close);
    return async () => {
      const at = closers.lastIndexOf(close);
      if (at < 0) return;
      closers.splice(at, 1);
      await close();
    };
  };
  return {
    add,
    use(resource) {
      add(() => resource.close());
      return resource;
    },
  };
}

/**
 * Runs and removes every closer, last registered first; one that throws does not keep the others from running.
 * Then rejects with the error, or an AggregateError of all of them.
 */
export async function closeAll(closers: Closer[]): Promise<void> {
  const errors: unknown[] = [];
  while (closers.length > 0) {
    try {
      await closers.pop()!();
    } catch (err) {
      errors.push(err);
    }
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, `${errors.length} cleanups failed`);
}
