import { join } from 'node:path';
import { describe, it, expect } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { childScript, spawnNode, waitForLine } from '../support/children.js';
import { useTempDir } from '../support/tmp.js';
import { sleep } from '../support/waitFor.js';
import { orThrow } from '../../src/events/storeResult.js';

describe('crash: SIGKILL while appending', () => {
  const tmp = useTempDir();

  it('after each of 8 kills the file opens, integrity_check is ok and the ledger equals the rebuild', async () => {
    const dbPath = join(tmp(), 'crash.db');
    let lastEvents = 0;
    for (let round = 0; round < 8; round++) {
      const child = spawnNode(childScript('appender'), [dbPath, `r${round}`]);
      await waitForLine(child, 'ready');
      await sleep(20 + Math.floor(Math.random() * 200)); // the point: killed at a random moment of its work
      const exited = new Promise((r) => child.on('exit', r));
      child.kill('SIGKILL');
      await exited;

      const store = openLedger(dbPath);
      expect(store.db.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(await orThrow(store.verifyProjection())).toEqual([]);
      const events = (await orThrow(store.readAll(-1, 10_000_000))).length;
      // Every round made progress and nothing committed before was lost.
      expect(events).toBeGreaterThan(lastEvents);
      lastEvents = events;
      await store.close();
    }
  }, 120_000);
});
