import type pg from 'pg';
import type { KeyUse } from '../../events/store.js';

/** Each key's latest use, never moved back (several relays write theirs). */
export async function recordKeyUses(db: pg.Pool | pg.ClientBase, uses: readonly KeyUse[]): Promise<void> {
  // One row per key (an upsert may not touch a row twice in one statement): the latest of each.
  const latest = new Map<string, number>();
  for (const { key, at } of uses) latest.set(key, Math.max(at, latest.get(key) ?? at));
  if (latest.size === 0) return;
  await db.query(
    'INSERT INTO key_uses (key, last_used_at) SELECT * FROM unnest($1::text[], $2::bigint[]) ' +
      'ON CONFLICT (key) DO UPDATE SET last_used_at = GREATEST(key_uses.last_used_at, excluded.last_used_at)',
    [[...latest.keys()], [...latest.values()]],
  );
}

export async function readKeyUses(db: pg.Pool | pg.ClientBase): Promise<KeyUse[]> {
  const { rows } = await db.query<{ key: string; last_used_at: string }>('SELECT key, last_used_at FROM key_uses ORDER BY key');
  return rows.map((r) => ({ key: r.key, at: Number(r.last_used_at) }));
}
