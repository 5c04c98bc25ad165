import type Database from 'better-sqlite3';
import type { KeyUse } from '../../events/store.js';

/**
 * The SQL of `key_uses`, beside the log: each key's latest use, never moved back. Prepared at first use, so that a
 * write engine on a ledger not yet migrated this far (a migration's own test) can be made.
 */
export function keyUsesTable(db: Database.Database) {
  let statements: { upsert: Database.Statement; all: Database.Statement } | undefined;
  const prepared = () =>
    (statements ??= {
      upsert: db.prepare(
        'INSERT INTO key_uses (key, last_used_at) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET last_used_at = max(last_used_at, excluded.last_used_at)',
      ),
      all: db.prepare('SELECT key, last_used_at FROM key_uses ORDER BY key'),
    });
  return {
    record(uses: readonly KeyUse[]): void {
      const { upsert } = prepared();
      for (const { key, at } of uses) upsert.run(key, at);
    },
    list(): KeyUse[] {
      return (prepared().all.all() as Array<{ key: unknown; last_used_at: unknown }>).map(({ key, last_used_at }) => ({ key: String(key), at: Number(last_used_at) }));
    },
  };
}
