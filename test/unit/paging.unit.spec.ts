import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import { pageLimit, pageOf } from '../../src/relay/operator/paging.js';

describe('operator API paging', () => {
  it('a page from limit + 1 read: the next cursor is the last key shown, null when nothing follows', () => {
    expect(pageOf(['a', 'b', 'c'], 2, (x) => x)).toEqual({ page: ['a', 'b'], next: 'b' });
    expect(pageOf(['a', 'b'], 2, (x) => x)).toEqual({ page: ['a', 'b'], next: null });
    expect(pageOf([], 2, (x: string) => x)).toEqual({ page: [], next: null });
  });

  it('the limit: its default when absent, 1 to max, else E400 naming limit', () => {
    expect(pageLimit(undefined, 50, 500)).toEqual(E.right(50));
    expect(pageLimit('500', 50, 500)).toEqual(E.right(500));
    for (const asked of ['0', '501']) {
      const refused = pageLimit(asked, 50, 500);
      expect(E.isLeft(refused) && [refused.left.code, JSON.parse(refused.left.body)]).toMatchObject(['E400', { field: 'limit', message: 'limit must be from 1 to 500' }]);
    }
  });
});
