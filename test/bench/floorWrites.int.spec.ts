/**
 * The floor's variants (bench/floor/floorWrites.ts) must write the same rows, or their CPU cannot be compared: given
 * the same transfers in the same batches, every variant leaves the same events (positions, keys, types, times, data)
 * and the same ledger rows, and the ones a relay would leave (three events, the row DONE at seq 2).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FLOOR_WRITERS, openFloorDb, type FloorTransfer, type FloorVariant } from '../../bench/floor/floorWrites.js';
import { useTempDir } from '../support/tmp.js';

const tempDir = useTempDir();

const transfers: FloorTransfer[] = Array.from({ length: 150 }, (_, i) => ({
  guid: `g-${String(i).padStart(3, '0')}`,
  // Quotes, a backslash and a non-ASCII character: the JSON variants must give the text back unchanged.
  request: `{"guid":"g-${i}","amount":${i},"note":"say \\"hi\\" \\\\ café"}`,
  fingerprint: `fp-${i}`,
  response: `{"guid":"g-${i}","code":"0000","txId":"tx-${i}"}`,
}));

function written(variant: FloorVariant): { events: unknown[]; ledger: unknown[] } {
  const db = openFloorDb(join(tempDir(), `${variant}.db`), variant);
  try {
    const writer = FLOOR_WRITERS[variant](db);
    for (let i = 0; i < transfers.length; i += 64) {
      const batch = transfers.slice(i, i + 64); // 64, 64, 22: a short last batch too
      writer.claim(batch, 1000 + i);
      writer.answer(batch, 2000 + i);
    }
    return {
      events: db.prepare('SELECT position, guid, seq, type, at, data FROM events ORDER BY position').all(),
      ledger: db
        .prepare('SELECT guid, status, code, request, response, fingerprint, attempts, created_at, updated_at, last_seq FROM ledger ORDER BY rowid')
        .all(),
    };
  } finally {
    db.close();
  }
}

describe('the floor benchmark writes', () => {
  const byRow = written('row');

  it('three events and a DONE row per transfer, row by row', () => {
    expect(byRow.events).toHaveLength(3 * transfers.length);
    expect(byRow.events.slice(0, 3)).toEqual([
      { position: 1, guid: 'g-000', seq: 0, type: 'Claimed', at: 1000, data: JSON.stringify({ request: transfers[0]!.request, fingerprint: 'fp-0' }) },
      { position: 2, guid: 'g-000', seq: 1, type: 'Sent', at: 1000, data: '{"attempt":1,"timeoutMs":3000}' },
      { position: 3, guid: 'g-001', seq: 0, type: 'Claimed', at: 1000, data: JSON.stringify({ request: transfers[1]!.request, fingerprint: 'fp-1' }) },
    ]);
    expect(byRow.ledger[149]).toEqual({
      guid: 'g-149', status: 'DONE', code: '0000', request: transfers[149]!.request, response: transfers[149]!.response,
      fingerprint: 'fp-149', attempts: 1, created_at: 1128, updated_at: 2128, last_seq: 2,
    });
  });

  it('the same rows with the ledger keyed by the Claimed event\'s position, each row under its own claim', () => {
    expect(written('byClaim')).toEqual(byRow);
    const db = openFloorDb(join(tempDir(), 'byClaim-keys.db'), 'byClaim');
    try {
      FLOOR_WRITERS.byClaim(db).claim(transfers.slice(0, 3), 1000);
      expect(db.prepare('SELECT l.claim, l.guid FROM ledger l JOIN events e ON e.position = l.claim AND e.guid = l.guid AND e.seq = 0').all()).toHaveLength(3);
    } finally {
      db.close();
    }
  });

  it.each(['json', 'jsonb'] as const)('the same rows with one statement per table and batch (%s)', (variant) => {
    expect(written(variant)).toEqual(byRow);
  });
});
