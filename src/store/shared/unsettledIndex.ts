/**
 * The partial index both stores keep over the rows that are not settled yet (everything but DONE and PURGED): the
 * sweep, resolve, reprocess and the dead-letter count look only for those, which are few at any time, so an index
 * over them alone is small, and a transfer's last write (to DONE) leaves it instead of adding to it.
 *
 * `UNSETTLED_SQL` is the index's WHERE, word for word. A query must carry this exact term for the planner to use the
 * index: neither SQLite nor a generic PostgreSQL plan can see that `status IN (?)` or `status = ANY($1)` with bound
 * values implies it. Fixed, list and order: the term is part of shipped migrations (SQLite 6 and 7, PostgreSQL 4).
 */
import type { Status } from '../../events/codecs.js';

const UNSETTLED_STATES = ['RECEIVED', 'SENT', 'UNKNOWN', 'FAILED'] as const satisfies readonly Status[];
const UNSETTLED: ReadonlySet<string> = new Set(UNSETTLED_STATES);
export const UNSETTLED_SQL = `status IN (${UNSETTLED_STATES.map((s) => `'${s}'`).join(', ')})`;

/** Whether a filter on these statuses may use the index (they are all unsettled), so that the query adds UNSETTLED_SQL. */
export const onlyUnsettled = (statuses: readonly string[]): boolean => statuses.length > 0 && statuses.every((s) => UNSETTLED.has(s));
