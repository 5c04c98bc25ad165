import type Database from 'better-sqlite3';

/**
 * The SQL of `leases`, beside the log: one row per GUID a maintenance run is working on (CONTRACT.md §4). A lease
 * changes no state, so it is no event; it only keeps another process from inquiring about or sending the row meanwhile.
 */
export function leasesTable(db: Database.Database) {
  const lastSeq = db.prepare('SELECT last_seq FROM ledger WHERE guid = ?').pluck();
  // Taken when there is none, when it has run out, or when it is already ours.
  const take = db.prepare(
    'INSERT INTO leases (guid, holder, until) VALUES (@guid, @holder, @until) ' +
      'ON CONFLICT(guid) DO UPDATE SET holder = excluded.holder, until = excluded.until WHERE leases.until <= @now OR leases.holder = excluded.holder',
  );
  const release = db.prepare('DELETE FROM leases WHERE holder = @holder OR until <= @now');
  return {
    lease(holder: string, rows: ReadonlyArray<{ readonly guid: string; readonly lastSeq: number }>, now: number, forMs: number): string[] {
      const leased: string[] = [];
      for (const { guid, lastSeq: seq } of rows) {
        if (lastSeq.get(guid) !== seq) continue;
        if (take.run({ guid, holder, until: now + forMs, now }).changes === 1) leased.push(guid);
      }
      return leased;
    },
    release(holder: string, now: number): void {
      release.run({ holder, now });
    },
  };
}
