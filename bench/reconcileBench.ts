/**
 * The reconciliation engine at the scale of issue #27: a day of N (default 1,000,000) transfers on both sides,
 * with a sprinkling of every category, reconciled by `reconcile()`; prints the time and the peak RSS.
 * The journal is a real file (NDJSON or CSV, in time order, so GUIDs arrive shuffled); the ledger side is a
 * synthetic LedgerSource that makes each row as it is read, in GUID order, or with `--ledger sqlite` a real SQLite
 * ledger filled first through the store's own commands and read as `guidgate reconcile` reads it (storeLedgerSource:
 * pages of the window in GUID order, lookups by GUID).
 * Usage: node dist/bench/reconcileBench.js [--n 1000000] [--format ndjson|csv] [--ledger synthetic|sqlite] [--json]
 */
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { benchArgs } from './benchArgs.js';
import { openJournalFile, reconcile, reportWriter, type LedgerRecord, type LedgerSource, type ReconcileWindow } from '../src/reconcile/index.js';
import type { EventStore } from '../src/events/store.js';
import { orThrow } from '../src/events/storeResult.js';
import { storeLedgerSource } from '../src/commands/reconcileRun.js';
import { openStore } from '../src/store/openStore.js';

const { values } = benchArgs({
  run: 'node dist/bench/reconcileBench.js',
  about: 'The reconciliation engine over a day of N transfers on both sides, with every category sprinkled in: the time and the peak RSS.',
  options: {
    n: { type: 'string', default: '1000000', value: 'N', help: 'transfers on each side' },
    format: { type: 'string', default: 'ndjson', value: 'ndjson|csv', help: "the journal file's format" },
    ledger: { type: 'string', default: 'synthetic', value: 'synthetic|sqlite', help: 'the ledger side: made as it is read, or a real SQLite ledger filled first' },
    json: { type: 'boolean', default: false, help: 'print the results as JSON' },
  },
});
const N = Number(values.n);
const format = values.format === 'csv' ? 'csv' : 'ndjson';
const DAY = 86_400_000;
const FROM = Date.UTC(2024, 4, 1) - 8 * 3_600_000; // a day in UTC+8
const window: ReconcileWindow = { from: FROM, to: FROM + DAY, pendingMs: 3_600_000 };

// GUID i is sent in time slot (i * STEP) mod N: the journal (in time order) holds the GUIDs shuffled.
const STEP = 999_983;
function inverse(a: number, m: number): number {
  let [r0, r1, s0, s1] = [a % m, m, 1, 0];
  while (r1 !== 0) {
    const q = Math.floor(r0 / r1);
    [r0, r1] = [r1, r0 - q * r1];
    [s0, s1] = [s1, s0 - q * s1];
  }
  return ((s0 % m) + m) % m;
}
const STEP_INV = inverse(STEP, N);
const slotOf = (i: number): number => Number((BigInt(i) * BigInt(STEP)) % BigInt(N));
const guidOf = (i: number): string => `G-${String(i).padStart(9, '0')}`;
const sentAt = (i: number): number => window.from + Math.floor((slotOf(i) * DAY) / N);

/** What GUID i is made to be, by i mod 1000: one in a thousand of each break kind. */
type Kind = 'matched' | 'missing_in_journal' | 'duplicate' | 'mismatch' | 'rejected' | 'failed' | 'unknown' | 'no_row' | 'purged' | 'sent_before';
function kindOf(i: number): Kind {
  switch (i % 1000) {
    case 1: return 'missing_in_journal';
    case 2: return 'duplicate';
    case 3: return 'mismatch';
    case 4: return 'rejected';
    case 5: return 'failed';
    case 6: return 'unknown';
    case 7: return 'no_row';
    case 8: return 'purged';
    case 9: return 'sent_before';
    default: return 'matched';
  }
}
const currencyOf = (i: number): string | null => (i % 10 === 3 ? 'USD' : i % 10 === 7 ? null : 'CNY');
const amountOf = (i: number): number => 100 + (i % 100_000);
const from = (i: number): string => `ACC-${100_000 + (i % 50_000)}`;
const to = (i: number): string => `ACC-${200_000 + (i % 70_000)}`;

function record(i: number): LedgerRecord {
  const kind = kindOf(i);
  const c = currencyOf(i);
  const request = `{"guid":"${guidOf(i)}","from":"${from(i)}","to":"${to(i)}","amount":${amountOf(i)}${c === null ? '' : `,"currency":"${c}"`},"memo":"salary"}`;
  const status = kind === 'failed' ? 'FAILED' : kind === 'unknown' ? 'UNKNOWN' : kind === 'purged' ? 'PURGED' : 'DONE';
  const code = kind === 'failed' ? 'E902' : kind === 'unknown' ? 'E901' : kind === 'rejected' ? 'B201' : '0000';
  return { guid: guidOf(i), status, code, request: kind === 'purged' ? null : request, firstSentAt: kind === 'sent_before' ? window.from - 7_200_000 : sentAt(i) };
}

const synthetic: LedgerSource = {
  async *window() {
    for (let i = 0; i < N; i++) {
      const kind = kindOf(i);
      if (kind !== 'no_row' && kind !== 'sent_before') yield record(i);
    }
  },
  async lookup(guids) {
    return guids.map((g) => Number(g.slice(2))).filter((i) => kindOf(i) === 'sent_before').map(record);
  },
};

/**
 * A real SQLite ledger holding what `record(i)` describes, written through the store's commands (Submit, then the
 * outcome), a chunk at a time at the chunk's first send time (the ledger's clock), so that created_at falls in the
 * window (before it for `sent_before`). Returns the store, open.
 */
async function fillSqlite(path: string): Promise<EventStore> {
  let now = window.from;
  const store = await openStore(path, { create: true, clock: () => now, synchronous: 'NORMAL' });
  const CHUNK = 2000;
  for (let start = 0; start < N; start += CHUNK) {
    const rows = Array.from({ length: Math.min(CHUNK, N - start) }, (_, k) => start + k).filter((i) => kindOf(i) !== 'no_row').map(record);
    for (const early of [true, false]) {
      const part = rows.filter((r) => (r.firstSentAt < window.from) === early);
      if (part.length === 0) continue;
      now = part[0]!.firstSentAt;
      await Promise.all(part.map((r) => orThrow(store.execute(r.guid, { type: 'Submit', request: fullRequest(r.guid), fingerprint: 'f', timeoutMs: 3000, maxAttempts: 5 }))));
      await Promise.all(
        part.map(async (r) => {
          if (r.status === 'UNKNOWN') return orThrow(store.execute(r.guid, { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
          if (r.status === 'FAILED') return orThrow(store.execute(r.guid, { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' }));
          await orThrow(store.execute(r.guid, { type: 'RecordAnswer', attempt: 1, code: r.code!, response: `{"code":"${r.code}"}`, latencyMs: 1 }));
          if (r.status === 'PURGED') await orThrow(store.execute(r.guid, { type: 'Purge', retentionMs: 0 }));
          return undefined;
        }),
      );
    }
  }
  return store;
}

/** The request of GUID `G-…` as record() writes it for a row that keeps one (a PURGED row's before it was purged). */
function fullRequest(guid: string): string {
  const i = Number(guid.slice(2));
  const c = currencyOf(i);
  return `{"guid":"${guidOf(i)}","from":"${from(i)}","to":"${to(i)}","amount":${amountOf(i)}${c === null ? '' : `,"currency":"${c}"`},"memo":"salary"}`;
}

async function writeJournal(path: string): Promise<void> {
  const out = createWriteStream(path, { highWaterMark: 1 << 20 });
  let text = format === 'csv' ? 'applied_at,guid,ref,from,to,amount,currency\n' : '';
  const line = (i: number, n: number, amount: number): string => {
    const appliedAt = sentAt(i) + 5 + n;
    const c = currencyOf(i);
    return format === 'csv'
      ? `${appliedAt},${guidOf(i)},tx-${i}-${n},${from(i)},${to(i)},${amount},${c ?? ''}\n`
      : `{"guid":"${guidOf(i)}","ref":"tx-${i}-${n}","from":"${from(i)}","to":"${to(i)}","amount":${amount},"currency":${c === null ? 'null' : `"${c}"`},"appliedAt":${appliedAt}}\n`;
  };
  for (let slot = 0; slot < N; slot++) {
    const i = Number((BigInt(slot) * BigInt(STEP_INV)) % BigInt(N));
    const kind = kindOf(i);
    if (kind === 'missing_in_journal') continue;
    text += line(i, 0, kind === 'mismatch' ? amountOf(i) + 1 : amountOf(i));
    if (kind === 'duplicate') text += line(i, 1, amountOf(i));
    if (text.length > 1 << 20) {
      if (!out.write(text)) await once(out, 'drain');
      text = '';
    }
  }
  out.end(text);
  await once(out, 'finish');
}

const dir = mkdtempSync(join(tmpdir(), 'guidgate-reconcile-bench-'));
try {
  const path = join(dir, `journal.${format === 'csv' ? 'csv' : 'ndjson'}`);
  const made = performance.now();
  await writeJournal(path);
  const writeSeconds = (performance.now() - made) / 1000;
  const filling = performance.now();
  const store = values.ledger === 'sqlite' ? await fillSqlite(join(dir, 'ledger.db')) : null;
  const fillSeconds = (performance.now() - filling) / 1000;
  const ledger = store === null ? synthetic : storeLedgerSource(store);
  const rssBefore = process.memoryUsage.rss();
  let peakSampled = rssBefore;
  const sampler = setInterval(() => (peakSampled = Math.max(peakSampled, process.memoryUsage.rss())), 50);
  const nullOut = new Writable({ write: (_c, _e, cb) => cb() });
  const report = reportWriter('terminal', nullOut);
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const journal = await openJournalFile(path);
  const summary = await reconcile({ window, journal, ledger, onBreak: (b) => report.write(b) });
  await store?.close();
  await report.end(summary);
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  clearInterval(sampler);
  const maxRssMb = process.resourceUsage().maxRSS / 1024;
  const result = {
    transfers: N,
    format,
    journalBytes: statSync(path).size,
    journalWriteSeconds: Number(writeSeconds.toFixed(1)),
    ledger: store === null ? 'synthetic' : 'sqlite',
    ledgerFillSeconds: Number(fillSeconds.toFixed(1)),
    reconcileSeconds: Number(seconds.toFixed(1)),
    cpuSeconds: Number(((cpu.user + cpu.system) / 1e6).toFixed(1)),
    rssBeforeMb: Math.round(rssBefore / 1048576),
    peakRssSampledMb: Math.round(Math.max(peakSampled, process.memoryUsage.rss()) / 1048576),
    maxRssMb: Math.round(maxRssMb),
    counts: summary.counts,
    breaks: summary.breaks,
    journal: summary.journal,
  };
  if (values.json) process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  else {
    process.stdout.write(`reconcile: ${N} transfers (${format} journal, ${result.ledger} ledger, ${(result.journalBytes / 1048576).toFixed(0)} MiB) in ${result.reconcileSeconds} s (${result.cpuSeconds} s of CPU); ` +
      `peak RSS ${result.maxRssMb} MB (process maximum; ${result.rssBeforeMb} MB before the run, ${result.peakRssSampledMb} MB sampled during it)\n`);
    process.stdout.write(`${Object.entries(summary.counts).map(([c, n]) => `${c} ${n}`).join(', ')}; breaks ${summary.breaks}\n`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
