import * as E from 'fp-ts/lib/Either.js';
import type { KeyUseLog } from '../../events/store.js';

/** How often `serve` writes the keys' last uses to the ledger (only the keys used since the last write). */
export const KEY_USES_EVERY_MS = 60_000;

export interface KeyUseRecorder {
  /** A request authenticated with this key now: noted in memory only. */
  used(key: string): void;
  /** Writes what was noted since the last write; what a failed write held is written with the next. */
  flush(): Promise<void>;
  /** Stops the timer and writes what is left (before the ledger closes). */
  close(): Promise<void>;
}

/**
 * Each key's last use, noted in memory at every request it authenticates and written to the ledger at most once per
 * `everyMs`: one small write a minute whatever the traffic, never one per request.
 */
export function createKeyUseRecorder(deps: {
  readonly store: Pick<KeyUseLog, 'recordKeyUses'>;
  readonly everyMs?: number;
  readonly clock?: () => number;
  readonly onError: (message: string) => void;
}): KeyUseRecorder {
  const clock = deps.clock ?? Date.now;
  let noted = new Map<string, number>();
  let writing: Promise<void> = Promise.resolve();
  const flush = (): Promise<void> => {
    writing = writing.then(async () => {
      if (noted.size === 0) return;
      const taken = noted;
      noted = new Map();
      const written = await deps.store.recordKeyUses([...taken].map(([key, at]) => ({ key, at })));
      if (E.isLeft(written)) {
        deps.onError(written.left.message);
        for (const [key, at] of taken) if ((noted.get(key) ?? 0) < at) noted.set(key, at);
      }
    });
    return writing;
  };
  const timer = setInterval(() => void flush(), deps.everyMs ?? KEY_USES_EVERY_MS);
  timer.unref();
  return {
    used(key) {
      noted.set(key, clock());
    },
    flush,
    async close() {
      clearInterval(timer);
      await flush();
    },
  };
}
