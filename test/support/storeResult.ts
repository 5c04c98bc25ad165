import * as E from 'fp-ts/lib/Either.js';
import { expect } from 'vitest';
import { LedgerUnavailableError, type StoreError, type StoreErrorCode } from '../../src/events/errors.js';
import type { StoreResult } from '../../src/events/storeResult.js';

/**
 * A store call that must fail: it resolves (a store never rejects) to a Left with this stable `code`, and with
 * a message matching `message` when given. Returns the error for further checks.
 */
export async function expectLeft<T>(result: StoreResult<T>, code: StoreErrorCode, message?: RegExp): Promise<StoreError> {
  const settled = await result;
  if (E.isRight(settled)) expect.fail(`expected a Left ${code}, got a Right: ${JSON.stringify(settled.right)?.slice(0, 200)}`);
  expect(settled.left.code).toBe(code);
  if (message !== undefined) expect(settled.left.message).toMatch(message);
  return settled.left;
}

/**
 * `store` with some calls refused: each method call for which `refuses(method)` says true (asked at the call)
 * answers a Left LEDGER_UNAVAILABLE with `message`, as a ledger that lost its disk would; every other call goes
 * to `store`.
 */
export function refusingStore<S extends object>(store: S, refuses: (method: string) => boolean, message = 'disk I/O error'): S {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function' || typeof prop !== 'string') return value;
      return (...args: unknown[]) => (refuses(prop) ? Promise.resolve(E.left(new LedgerUnavailableError(message))) : (value as (...a: unknown[]) => unknown).apply(target, args));
    },
  });
}
