import { hostname } from 'node:os';
/**
 * Fills a ledger with DONE transfers under random UUID GUIDs (as many channels make them), fast: through the
 * store's own write path (decide, evolve, the log and the projection), synchronously in big batches, one
 * transaction each, without fsync. For the growth bench only.
 *
 * Also a command: node dist/bench/fillLedger.js N PATH (then `npm run bench -- --filled PATH`).
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { createWriteEngine, type WriteOp } from '../src/store/sqlite/writeEngine.js';
import { openDatabase } from '../src/store/sqlite/openDatabase.js';
import { fingerprintOf } from '../src/contract/transferRequest.js';
import { ledgerProjection } from '../src/projections/ledgerProjection.js';
import { benchArgs, usageText } from './benchArgs.js';

export function fillLedger(path: string, transfers: number, opts: { batch?: number; extraField?: string; onProgress?: (done: number) => void } = {}): void {
  const batch = opts.batch ?? 5000;
  const db = openDatabase({ path, synchronous: 'NORMAL', busyTimeoutMs: 5000 });
  db.pragma('synchronous = OFF'); // a throwaway file: a crash while filling loses only the bench's time
  const engine = createWriteEngine(db, ledgerProjection, 5000);
  const run = (ops: WriteOp[]) => {
    for (const o of engine.run(ops)) {
      if (!o.ok || (o.value as { kind?: string }).kind !== 'applied') throw new Error(`fill refused: ${JSON.stringify(o)}`);
    }
  };
  // Written as serve writes them, who and with what parameters included (the audit trail), so the rows weigh what real ones do.
  const actor = { by: 'serve', host: hostname(), pid: process.pid, params: { timeoutMs: 3000, maxAttempts: 5, minAgeMs: 60_000 } };
  try {
    for (let done = 0; done < transfers; done += batch) {
      const guids = Array.from({ length: Math.min(batch, transfers - done) }, () => randomUUID());
      const now = Date.now();
      run(guids.map((guid) => {
        const f = { guid, from: 'ACC-1001', to: 'ACC-2002', amount: 100, currency: 'CNY' };
        const request = `{"guid":"${guid}","from":"ACC-1001","to":"ACC-2002","amount":100,"currency":"CNY"${opts.extraField ?? ''}}`;
        return { op: 'execute', guid, now, actor, command: { type: 'Submit', request, fingerprint: fingerprintOf(f), timeoutMs: 3000, maxAttempts: 5 } };
      }));
      run(guids.map((guid) => ({
        op: 'execute', guid, now, actor,
        command: { type: 'RecordAnswer', attempt: 1, code: '0000', latencyMs: 1, response: `{"guid":"${guid}","code":"0000","message":"transfer done","txId":"tx-${randomUUID()}","fromBalance":999999998500}` },
      })));
      opts.onProgress?.(done + guids.length);
    }
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}

/** How many rows the ledger at `path` holds. */
export function ledgerRows(path: string): number {
  const db = openDatabase({ path, synchronous: 'NORMAL', busyTimeoutMs: 5000 });
  try {
    return Number((db.prepare('SELECT COUNT(*) AS n FROM ledger').get() as { n: number }).n);
  } finally {
    db.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const usage = {
    run: 'node dist/bench/fillLedger.js',
    about: 'Fills the ledger at PATH with N DONE transfers under random UUID GUIDs, through the store\'s write path without fsync (then `npm run bench -- --filled PATH`).',
    options: {},
    positionals: 'N PATH',
  };
  const [n, path] = benchArgs(usage).positionals;
  if (n === undefined || path === undefined) {
    process.stderr.write(usageText(usage));
    process.exit(2);
  }
  const t = performance.now();
  const extraField = `,"note":"${'x'.repeat(150)}"`; // as the bench's default --extra-bytes
  fillLedger(path, Number(n), { extraField, onProgress: (done) => done % 50_000 === 0 && process.stderr.write(`${done} in ${((performance.now() - t) / 1000).toFixed(0)} s\n`) });
}
