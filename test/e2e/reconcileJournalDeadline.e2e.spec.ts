/**
 * `reconcile --account-url` reads the journal over HTTP within one overall deadline (`--journal-timeout`, default
 * 15m): a journal that trickles (a byte now and then, each well within the per-wait timeout) fails the run at the
 * deadline, rather than running forever. A real HTTP server on loopback; the command as a real process.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JournalSourceError } from '../../src/reconcile/errors.js';
import { openJournalUrl } from '../../src/reconcile/journalInput.js';
import { reconcile } from '../../src/reconcile/index.js';
import { openStore } from '../../src/store/openStore.js';
import { memoryLedger } from '../support/reconcile.js';
import { cli } from '../support/commandsSeed.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';

const HOUR = 3_600_000;

describe('the journal over HTTP has an overall deadline', () => {
  const cleanup = useCleanup();
  const tmp = useTempDir();

  /** A journal server that answers 200 NDJSON and then sends one blank line every 50 ms, forever. */
  async function trickling(): Promise<string> {
    const timers = new Set<NodeJS.Timeout>();
    const server: Server = createServer((_req, res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      const t = setInterval(() => res.write('\n'), 50);
      timers.add(t);
      res.on('close', () => clearInterval(t));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.add(() => {
      for (const t of timers) clearInterval(t);
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    });
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it('openJournalUrl: the run fails at the deadline naming --journal-timeout, although every wait was short', async () => {
    const base = await trickling();
    const range = { from: Date.now() - HOUR, to: Date.now() };
    const started = performance.now();
    const run = reconcile({ window: { ...range, pendingMs: 0 }, journal: await openJournalUrl(base, range, { timeoutMs: 5000, deadlineMs: 800 }), ledger: memoryLedger([]), onBreak: () => {}, tempDir: tmp() });
    await expect(run).rejects.toThrow(JournalSourceError);
    await expect(run).rejects.toThrow(/was not read in full within 800 ms \(--journal-timeout\)/);
    expect(performance.now() - started).toBeLessThan(4000);
  });

  it('guidgate reconcile --account-url … --journal-timeout 1s: exit 1, the run did not finish; a zero deadline is bad usage', async () => {
    const base = await trickling();
    const db = join(tmp(), 'ledger.db');
    await (await openStore(db, { create: true })).close();
    const now = Date.now();
    const window = ['--from', String(now - HOUR), '--to', String(now), '--pending', '0'];
    const r = await cli(['reconcile', '--db', db, '--account-url', base, ...window, '--journal-timeout', '1s'], {}, { killAfterMs: 30_000 });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('was not read in full within 1000 ms (--journal-timeout)');
    const zero = await cli(['reconcile', '--db', db, '--account-url', base, ...window, '--journal-timeout', '0s']);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain('--journal-timeout');
  });
});
