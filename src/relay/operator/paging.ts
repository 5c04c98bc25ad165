import * as E from 'fp-ts/lib/Either.js';
import { codeReply, type Reply } from '../replies.js';

/**
 * Keyset paging of the operator API's lists: a route reads one item more than the page holds, which says whether
 * there is a next page without ever answering an empty last one.
 */

/** The page size a query asks for: `byDefault` when absent, else from 1 to `max`; otherwise the E400 naming `limit`. */
export function pageLimit(asked: string | undefined, byDefault: number, max: number): E.Either<Reply, number> {
  const limit = asked === undefined ? byDefault : Number(asked);
  if (limit < 1 || limit > max) return E.left(codeReply('E400', undefined, { field: 'limit', message: `limit must be from 1 to ${max}` }));
  return E.right(limit);
}

/** The page made of what was read with `limit + 1`: the first `limit`, and the key of the last one shown where more follow (the next page's cursor), else null. */
export function pageOf<T>(read: readonly T[], limit: number, keyOf: (item: T) => string): { readonly page: T[]; readonly next: string | null } {
  const page = read.slice(0, limit);
  return { page, next: read.length > limit ? keyOf(page[page.length - 1]!) : null };
}
