import pg from 'pg';
import type { StoreBackdoor } from './storeContract.js';

/** The backdoor of a PostgreSQL ledger: its own connection to the database, one statement at a time. */
export function postgresBackdoor(url: string): StoreBackdoor {
  const query = async (sql: string, ...params: unknown[]): Promise<pg.QueryResult> => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return await client.query(sql, params);
    } finally {
      await client.end();
    }
  };
  const run = async (sql: string, ...params: unknown[]): Promise<void> => {
    await query(sql, ...params);
  };
  return {
    setProjectionSeq: (guid, lastSeq) => run('UPDATE ledger SET last_seq = $1 WHERE guid = $2', lastSeq, guid),
    setProjectionStatus: (guid, status, code) => run('UPDATE ledger SET status = $1, code = $2 WHERE guid = $3', status, code, guid),
    deleteProjectionRow: (guid) => run('DELETE FROM ledger WHERE guid = $1', guid),
    insertEvent: (guid, seq, type, data, actor) => run('INSERT INTO events (guid, seq, type, at, data, actor) VALUES ($1, $2, $3, 1, $4, $5)', guid, seq, type, data, actor ?? null),
    async actorsStored() {
      const { rows } = await query('SELECT (SELECT count(*) FROM actors)::integer AS actors, (SELECT count(*) FROM events WHERE actor IS NOT NULL)::integer AS "eventsWithText"');
      return rows[0] as { actors: number; eventsWithText: number };
    },
    async rawEventData(guid) {
      const { rows } = await query('SELECT coalesce(string_agg(data, \',\' ORDER BY seq), \'\') AS d FROM events WHERE guid = $1', guid);
      return (rows[0] as { d: string }).d;
    },
    failProjectionWritesOf: (guid) =>
      run(`CREATE FUNCTION refuse_by_test() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN
             IF NEW.guid = '${guid.replace(/'/g, "''")}' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $f$;
           CREATE TRIGGER refuse_by_test BEFORE INSERT OR UPDATE ON ledger FOR EACH ROW EXECUTE FUNCTION refuse_by_test();`),
    async lock(guid) {
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      await holder.query('BEGIN');
      if (guid === undefined) await holder.query('LOCK TABLE ledger IN EXCLUSIVE MODE');
      else await holder.query('SELECT 1 FROM ledger WHERE guid = $1 FOR UPDATE', [guid]);
      return async () => {
        await holder.query('ROLLBACK');
        await holder.end();
      };
    },
    markSchemaNewer: () => run('INSERT INTO schema_version (version) VALUES (999)'),
  };
}
