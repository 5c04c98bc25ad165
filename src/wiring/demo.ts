import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { openStore, processActor } from '../store/openStore.js';
import { createAccountClient } from '../account/accountClient.js';
import { inquiryPacing } from '../account/inquiryPacer.js';
import { startNaive } from '../relay/naive.js';
import { startSimulator, type Faults, type Simulator } from '../simulator/index.js';
import { serve } from './serve.js';
import { resolveUnknown } from '../commands/resolve.js';
import { reprocessFailed } from '../commands/reprocess.js';
import { orThrow } from '../events/storeResult.js';
import type { EventStore } from '../events/store.js';
import { journalRange, openJournalUrl, reconcile, type LedgerSource, type ReconcileSummary, type ReconcileWindow } from '../reconcile/index.js';
import { reconcileRun } from '../commands/reconcileRun.js';
import { DEFAULTS } from '../shared/defaults.js';
import { formatMoney } from '../shared/money.js';

export interface DemoOptions {
  readonly transfers: number;
  readonly concurrency: number;
  readonly out?: (line: string) => void;
}

export interface ChannelTally {
  transfers: number;
  requests: number;
  accountCalls: number;
  doubleDebits: number;
  /** In minor units (fen) of CURRENCY. */
  moneyInError: number;
  finalCodes: Record<string, number>;
}

/** The same faults for both account systems: some transfers are applied but their answer never arrives in time. */
const FAULTS: Partial<Faults> = {
  byGuidPrefix: { 'late-': 'late-answer', 'reset-': 'reset', 'hold-': 'hold' },
  lateMs: 1200,
  // Right after a timeout the account system may still be "processing": an early inquiry would say 404.
  processingMs: 1500,
};
const RELAY_TIMEOUT_MS = 600;
const CHANNEL_TIMEOUT_MS = 900;
const RESENDS = 3;
/** The currency of every demo transfer. */
const CURRENCY = 'CNY';

/** A transfer's GUID says what the faulty account system will do with it: most are answered normally. */
function guidFor(i: number, run: string): string {
  const kind = i % 10 === 1 ? 'late' : i % 10 === 4 ? 'reset' : i % 25 === 7 ? 'hold' : 'ok';
  return `${kind}-${run}-${i}`;
}

/**
 * A channel as the seed describes it: it sends each transfer and, on a timeout or a 5xx, resends the same
 * GUID and bytes (up to RESENDS times). Resending is normal.
 */
async function channel(url: string, guids: string[], concurrency: number, onDone: () => void): Promise<{ requests: number; finalCodes: Record<string, number> }> {
  let requests = 0;
  const finalCodes: Record<string, number> = {};
  let next = 0;
  const one = async (guid: string, i: number) => {
    const body = JSON.stringify({ guid, from: `ACC-${1000 + (i % 7)}`, to: `ACC-${2000 + (i % 5)}`, amount: 100 + i, currency: CURRENCY });
    let code = 'timeout';
    for (let attempt = 0; attempt <= RESENDS; attempt++) {
      requests++;
      try {
        const res = await request(`${url}/v1/transfers`, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json' },
          headersTimeout: CHANNEL_TIMEOUT_MS,
          bodyTimeout: CHANNEL_TIMEOUT_MS,
        });
        const text = await res.body.text();
        code = (JSON.parse(text) as { code?: string }).code ?? `HTTP ${res.statusCode}`;
        if (res.statusCode < 500 && res.statusCode !== 409) break;
      } catch {
        code = 'timeout';
      }
      await new Promise((r) => setTimeout(r, 150));
    }
    finalCodes[code] = (finalCodes[code] ?? 0) + 1;
    onDone();
  };
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < guids.length) {
        const i = next++;
        await one(guids[i]!, i);
      }
    }),
  );
  return { requests, finalCodes };
}

function tally(sim: Simulator, transfers: number, requests: number, finalCodes: Record<string, number>): ChannelTally {
  const s = sim.stats();
  let moneyInError = 0;
  for (const guid of s.doubleApplied) {
    const i = Number(guid.split('-').at(-1));
    moneyInError += (s.applied[guid]! - 1) * (100 + i);
  }
  return { transfers, requests, accountCalls: s.totalCalls, doubleDebits: s.doubleApplied.length, moneyInError, finalCodes };
}

const fmtCodes = (c: Record<string, number>) =>
  Object.entries(c)
    .sort()
    .map(([k, v]) => `${k}×${v}`)
    .join(' ');

/**
 * `guidgate demo`: the seed's lesson in about 15 seconds (what `demo --help` and the README say). The same resending channel load goes through the
 * naive relay and through guidgate, each in front of its own faulty, non-idempotent account system; then
 * guidgate's unknowns are settled by inquiry and its failures re-sent.
 */
export async function runDemo(opts: DemoOptions): Promise<{
  naive: ChannelTally; guidgate: ChannelTally; settled: Record<string, number>; settledDoubles: number;
  reconciled: { naive: ReconcileSummary; guidgate: ReconcileSummary };
}> {
  const out = opts.out ?? ((l: string) => process.stdout.write(`${l}\n`));
  const dir = mkdtempSync(join(tmpdir(), 'guidgate-demo-'));
  const startedAt = Date.now();
  const cleanup: Array<() => Promise<unknown>> = [];
  try {
    const simNaive = await startSimulator({ port: 0, faults: FAULTS });
    cleanup.push(() => simNaive.close());
    const simGg = await startSimulator({ port: 0, faults: FAULTS });
    cleanup.push(() => simGg.close());
    const naive = await startNaive({ port: 0, host: '127.0.0.1', accountUrl: simNaive.url, timeout: RELAY_TIMEOUT_MS });
    cleanup.push(() => naive.close());
    const db = join(dir, 'demo.db');
    const gg = await serve({
      port: 0, host: '127.0.0.1', db, accountUrl: simGg.url, timeoutMs: RELAY_TIMEOUT_MS, graceMs: 500, maxAttempts: 5,
      synchronous: 'FULL', busyTimeoutMs: DEFAULTS.busyTimeoutMs, logLevel: 'silent', out: () => {},
    });
    cleanup.push(() => gg.close());

    out(`guidgate demo: ${opts.transfers} transfers, ${opts.concurrency} at a time; the channel resends on timeout (${CHANNEL_TIMEOUT_MS} ms) up to ${RESENDS} times.`);
    out('The account systems are NOT idempotent; 1 in 10 transfers is applied but answered late, 1 in 10 applied then reset, 1 in 25 never answered.');
    const guids = (run: string) => Array.from({ length: opts.transfers }, (_, i) => guidFor(i, run));

    const progress = (label: string) => {
      let n = 0;
      const tty = process.stdout.isTTY === true;
      return () => {
        n++;
        if (tty) process.stdout.write(`\r  ${label}: ${n}/${opts.transfers}`);
        else if (n % Math.max(1, Math.floor(opts.transfers / 4)) === 0 || n === opts.transfers) out(`  ${label}: ${n}/${opts.transfers}`);
        if (tty && n === opts.transfers) process.stdout.write('\n');
      };
    };
    const [n, g] = await Promise.all([
      channel(naive.url, guids('n'), opts.concurrency, progress('through the naive relay')),
      channel(gg.url, guids('g'), opts.concurrency, progress('through guidgate       ')),
    ]);
    const naiveTally = tally(simNaive, opts.transfers, n.requests, n.finalCodes);
    const ggTally = tally(simGg, opts.transfers, g.requests, g.finalCodes);

    const row = (label: string, a: string | number, b: string | number) => `${label.padEnd(28)} ${String(a).padStart(14)} ${String(b).padStart(14)}`;
    out('');
    out(row('', 'naive relay', 'guidgate'));
    out(row('transfers', naiveTally.transfers, ggTally.transfers));
    out(row('requests (with resends)', naiveTally.requests, ggTally.requests));
    out(row('account system calls', naiveTally.accountCalls, ggTally.accountCalls));
    out(row('double debits', naiveTally.doubleDebits, ggTally.doubleDebits));
    out(row('money moved in error', formatMoney(naiveTally.moneyInError, CURRENCY), formatMoney(ggTally.moneyInError, CURRENCY)));
    out(`  last answer per transfer, naive:    ${fmtCodes(naiveTally.finalCodes)}`);
    out(`  last answer per transfer, guidgate: ${fmtCodes(ggTally.finalCodes)}`);

    // Settle guidgate's open cases: wait past the processing time, inquire, then re-send what never left.
    simGg.resetFaults();
    await gg.close();
    out('');
    out(`settling guidgate: waiting ${FAULTS.processingMs} ms (the --min-age), then resolve and reprocess…`);
    const store = await openStore(db, { actor: processActor('demo') });
    // Paced as `resolve` and `reprocess` are by default (--inquiry-rate): the line after them shows what the core saw.
    const account = createAccountClient({ baseUrl: simGg.url, timeoutMs: 2000, inquiryPacing: inquiryPacing(DEFAULTS.inquiryRate, { forChannels: false }) });
    try {
      await new Promise((r) => setTimeout(r, (FAULTS.processingMs ?? 0) + 300));
      const resolved = await resolveUnknown({ store, account }, { minAgeMs: FAULTS.processingMs ?? 0, graceMs: 500 });
      out(`  resolve:   ${resolved.processed} found processed → DONE, ${resolved.absent} absent → FAILED, ${resolved.stillUnknown} still unknown`);
      // The same --min-age as resolve: a row resolve found absent is asked about again before it is sent (§7).
      const reprocessed = await reprocessFailed({ store, account }, { maxAttempts: 10, timeoutMs: 2000, graceMs: 500, minAgeMs: FAULTS.processingMs ?? 0 });
      out(`  reprocess: ${reprocessed.done} sent again and answered, ${reprocessed.failed} failed, ${reprocessed.unknown} unknown`);
      const load = simGg.inquiryLoad();
      out(`  inquiries: ${load.total}, paced at ${DEFAULTS.inquiryRate} (--inquiry-rate): the account system saw at most ${load.peakPerSecond} in any one second`);
      const counts = await orThrow(store.countByStatus());
      const settled = Object.fromEntries(Object.entries(counts).filter(([, v]) => v.count > 0).map(([k, v]) => [k, v.count]));
      const final = simGg.stats();
      out(`  settled ledger: ${fmtCodes(settled)}; account calls ${final.totalCalls}, applied ${final.totalApplied} (of ${opts.transfers} transfers), double debits ${final.doubleApplied.length}`);
      out(
        `${naiveTally.doubleDebits > 0 ? `The naive relay debited ${naiveTally.doubleDebits} transfers twice or more` : 'The naive relay got lucky this time (no double debit)'}; ` +
          (final.doubleApplied.length === 0 && settled['DONE'] === opts.transfers && final.totalApplied === opts.transfers
            ? 'guidgate none, and every transfer ended applied exactly once.'
            : `guidgate: ${final.doubleApplied.length} double debits, ${settled['DONE'] ?? 0} of ${opts.transfers} transfers DONE. THIS IS A DEFECT.`),
      );
      const window: ReconcileWindow = { from: startedAt - 1000, to: Date.now() + 1000, pendingMs: 0 };
      const reconciled = await reconcileBoth(window, store, simNaive.url, simGg.url);
      out('');
      out(`reconciliation (each account system's journal against the relay's ledger, ${new Date(window.from).toISOString()} to ${new Date(window.to).toISOString()}):`);
      out(`  naive relay: ${reconcileLine(reconciled.naive)}`);
      out(`               (it keeps no ledger: every posting applied once is missing_in_ledger)`);
      out(`  guidgate:    ${reconcileLine(reconciled.guidgate)}`);
      return { naive: naiveTally, guidgate: ggTally, settled, settledDoubles: final.doubleApplied.length, reconciled };
    } finally {
      await account.close();
      await store.close();
    }
  } finally {
    for (const c of cleanup.reverse()) await c().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The naive relay keeps no ledger: its side of a reconciliation is empty. */
const NO_LEDGER: LedgerSource = {
  async *window() {},
  async lookup() {
    return [];
  },
};

/** `guidgate reconcile` of both account systems' journals (GET /journal) over the demo's window. */
async function reconcileBoth(window: ReconcileWindow, store: EventStore, naiveAccountUrl: string, ggAccountUrl: string): Promise<{ naive: ReconcileSummary; guidgate: ReconcileSummary }> {
  const naive = await reconcile({ window, journal: await openJournalUrl(naiveAccountUrl, journalRange(window)), ledger: NO_LEDGER, onBreak: () => {} });
  const gg = await reconcileRun({ store, window, journal: await openJournalUrl(ggAccountUrl, journalRange(window)) });
  return { naive, guidgate: gg.summary };
}

function reconcileLine(s: ReconcileSummary): string {
  const c = s.counts;
  const doubled = s.money.duplicate_in_journal.journal;
  const money = [...doubled].map(([currency, amount]) => formatMoney(amount, currency)).join(', ');
  const breaks = s.breaks === 0 ? 'no break' : `${s.breaks} breaks (P1 ${s.severities.P1}, P2 ${s.severities.P2})`;
  return (
    `${breaks}: duplicate_in_journal ${c.duplicate_in_journal}${c.duplicate_in_journal > 0 ? ` (${money} posted by those transfers)` : ''}, ` +
    `missing_in_ledger ${c.missing_in_ledger}, matched ${c.matched}`
  );
}
