import type pg from 'pg';
import type { StoredEvent } from '../../events/codecs.js';
import { rowToEvent, SELECT_EVENTS } from '../shared/rowCodecs.js';

/** The log in global order from after `afterPosition`. */
export async function readAll(db: pg.Pool | pg.ClientBase, afterPosition: number, limit: number): Promise<StoredEvent[]> {
  const { rows } = await db.query({
    name: 'guidgate_read_all',
    text: `${SELECT_EVENTS} WHERE e.position > $1 ORDER BY e.position LIMIT $2`,
    values: [afterPosition, Math.max(0, Math.floor(limit))],
  });
  return rows.map(rowToEvent);
}

/** The whole log, in pages (a fold of a large log must not hold one giant result). */
export async function readWholeLog(db: pg.Pool | pg.ClientBase, pageSize = 10_000): Promise<StoredEvent[]> {
  const all: StoredEvent[] = [];
  for (let after = -1; ; ) {
    const page = await readAll(db, after, pageSize);
    all.push(...page);
    if (page.length < pageSize) return all;
    after = page[page.length - 1]!.position;
  }
}
