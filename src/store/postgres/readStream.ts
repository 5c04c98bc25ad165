import type pg from 'pg';
import type { StoredEvent } from '../../events/codecs.js';
import { rowToEvent } from '../shared/rowCodecs.js';

/** One GUID's events in seq order. */
export async function readStream(db: pg.Pool | pg.ClientBase, guid: string): Promise<StoredEvent[]> {
  const { rows } = await db.query({
    name: 'guidgate_read_stream',
    text: 'SELECT position, guid, seq, type, at, data, actor FROM events WHERE guid = $1 ORDER BY seq',
    values: [guid],
  });
  return rows.map(rowToEvent);
}
