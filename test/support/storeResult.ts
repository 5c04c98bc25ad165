import * as E from 'fp-ts/lib/Either.js';
import { expect } from 'vitest';
import type { StoreError, StoreErrorCode } from '../../src/events/errors.js';
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
