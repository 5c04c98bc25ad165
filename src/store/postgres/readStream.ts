import type pg from 'pg';
import type { StoredEvent } from '../../events/codecs.js';
import { rowToEvent, SELECT_EVENTS } from '../shared/rowCodecs.js';

/** One GUID's events in seq order. */
export async function readStream(db: pg.Pool | pg.ClientBase, guid: string): Promise<StoredEvent[]> {
  const { rows } = await db.query({
    name: 'guidgate_read_stream',
    text: `${SELECT_EVENTS} WHERE e.guid = $1 ORDER BY e.seq`,
    values: [guid],
  });
  return rows.map(rowToEvent);
}
