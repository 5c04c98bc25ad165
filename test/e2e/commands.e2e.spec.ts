/**
 * The operator commands as an operator runs them: `node bin/guidgate …` as real processes, on a real ledger
 * file, against the real simulator (and the real relay on the same file where a channel takes part).
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, it, expect } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { REPO_ROOT, runToEnd } from '../support/children.js';
import { cli, seedRow, snapshot, transferBody } from '../support/commandsSeed.js';
import { startHarness } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';
import { useCleanup } from '../support/cleanup.js';
import { orThrow } from '../../src/events/storeResult.js';
import { ledgerRecordOf } from '../../src/reconcile/ledgerFacts.js';
import { runOver } from '../support/reconcile.js';

const LONG_AGO = Date.UTC(2020, 0, 1);

describe('guidgate operator commands as processes', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const simulator = async (): Promise<Simulator> => {
    const sim = await startSimulator({ port: 0 });
    cleanup.add(() => sim.close());
    return sim;
  };
  /** A ledger file with these rows, all last changed in 2020 unless `young`. */
  const ledgerWith = async (rows: Array<[guid: string, status: Parameters<typeof seedRow>[2], opts?: Parameters<typeof seedRow>[3]]>, young: string[] = []): Promise<string> => {
    const db = join(tmp(), 'ledger.db');
    const old = openLedger(db, { clock: () => LONG_AGO });
    const now = openLedger(db);
    for (const [guid, status, opts] of rows) await seedRow(young.includes(guid) ? now : old, guid, status, opts);
    await old.close();
    await now.close();
    return db;
  };
  /** A ledger with one row FAILED by an inquiry (it was sent, then an inquiry said absent) in 2020. */
  const ledgerWithFailedByInquiry = async (guid: string): Promise<string> => {
    const db = join(tmp(), 'ledger.db');
    const old = openLedger(db, { clock: () => LONG_AGO });
    await seedRow(old, guid, 'UNKNOWN');
    await orThrow(old.execute(guid, { type: 'Resolve', outcome: 'absent' }));
    await old.close();
    return db;
  };
  const refusedUrl = async (): Promise<string> => {
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as { port: number }).port;
    await new Promise((r) => srv.close(r));
    return `http://127.0.0.1:${port}`;
  };
  const row = async (db: string, guid: string) => {
    const s = openLedger(db);
    try {
      return await orThrow(s.getLedger(guid));
    } finally {
      await s.close();
    }
  };

  it('resolve (flags from GUIDGATE_* env): processed → DONE with the answer byte for byte, absent → FAILED; history shows it', async () => {
    const sim = await simulator();
    const applied = transferBody('CLI-P');
    // The account system did process CLI-P (the relay just never heard back); it never saw CLI-A.
    const answer = await (await fetch(`${sim.url}/transfer`, { method: 'POST', body: applied.body })).text();
    const db = await ledgerWith([['CLI-P', 'UNKNOWN', applied], ['CLI-A', 'UNKNOWN']]);

    const r = await cli(['resolve', '--min-age', '1m', '--json'], { GUIDGATE_DB: db, GUIDGATE_ACCOUNT_URL: sim.url });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      swept: { neverSent: 0, orphaned: 0 }, candidates: 2, processed: 1, absent: 1, stillUnknown: 0, skipped: 0, unreachable: 0, ledgerErrors: 0, dryRun: false, exitCode: 0,
      tooYoung: { count: 0, firstEligibleAt: null, firstEligibleInMs: null }, guids: { processed: ['CLI-P'], absent: ['CLI-A'] },
    });
    expect(await row(db, 'CLI-P')).toMatchObject({ status: 'DONE', code: '0000', response: answer });
    expect(await row(db, 'CLI-A')).toMatchObject({ status: 'FAILED', code: 'E902' });
    expect(sim.guidStats('CLI-P').calls).toBe(1);

    const h = await cli(['history', 'CLI-P', '--json', '--db', db]);
    expect(h.code).toBe(0);
    const events = JSON.parse(h.stdout) as Array<Record<string, unknown>>;
    expect(events.map((e) => Object.keys(e).sort())).toEqual(Array(4).fill(['at', 'data', 'seq', 'type']));
    expect(events.map((e) => [e['seq'], e['type']])).toEqual([[0, 'Claimed'], [1, 'Sent'], [2, 'TimedOut'], [3, 'Resolved']]);
    expect(events[0]!['at']).toBe(LONG_AGO);
    expect(events[0]!['data']).toEqual({ request: applied.body, fingerprint: applied.fingerprint });
    expect(events[3]!['data']).toEqual({ source: 'inquiry', outcome: 'processed', code: '0000', response: answer });

    const human = await cli(['history', 'CLI-P', '--db', db]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^ {2}0 {2}2020-01-01T00:00:00\.000Z {2}Claimed/m);
    expect(human.stdout).toMatch(/ {2}3 {2}\d{4}-\d\d-\d\dT[\d:.]+Z {2}Resolved/m);
    expect(human.stdout).toContain('CLI-P: 4 events; now DONE 0000');
  });

  it('resolve and reprocess exit 1 when the account system cannot be reached for any row; the rows stay as they were', async () => {
    const db = await ledgerWith([['U-1', 'UNKNOWN'], ['U-2', 'UNKNOWN'], ['F-1', 'FAILED']]);
    const down = await refusedUrl();
    const r = await cli(['resolve', '--account-url', down, '--min-age', '1m', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^resolve: candidates=2 processed=0 absent=0 still-unknown=2 unreachable=2 skipped=0 ledger-errors=0/m);
    expect(r.stderr).toContain('could not be reached for any row');
    expect(r.stderr).toMatch(/ECONNREFUSED/);
    expect(await row(db, 'U-1')).toMatchObject({ status: 'UNKNOWN', attempts: 1 });

    const p = await cli(['reprocess', '--account-url', down, '--json', '--db', db]);
    expect(p.code).toBe(1);
    expect(JSON.parse(p.stdout)).toMatchObject({ candidates: 1, failed: 1, done: 0, exitCode: 1 });
    expect(await row(db, 'F-1')).toMatchObject({ status: 'FAILED', attempts: 2 });
  });

  it('reprocess resends FAILED rows under the cap with their stored bytes, --limit at a time; the cap is respected', async () => {
    const sim = await simulator();
    const db = await ledgerWith([['RP-1', 'FAILED'], ['RP-2', 'FAILED', { attempts: 2 }], ['RP-CAP', 'FAILED', { attempts: 3 }], ['RP-U', 'UNKNOWN']]);
    const first = await cli(['reprocess', '--account-url', sim.url, '--max-attempts', '3', '--limit', '1', '--db', db]);
    expect([first.code, first.stdout.trim()]).toEqual([0, 'reprocess: candidates=1 done=1 failed=0 unknown=0 skipped=0 found=0 held=0 withheld=0 ledger-errors=0\n  done: RP-1']);
    const rest = await cli(['reprocess', '--account-url', sim.url, '--db', db], { GUIDGATE_MAX_ATTEMPTS: '3' });
    expect([rest.code, rest.stdout.trim()]).toEqual([0, 'reprocess: candidates=1 done=1 failed=0 unknown=0 skipped=0 found=0 held=0 withheld=0 ledger-errors=0\n  done: RP-2']);
    expect(sim.stats().calls).toEqual({ 'RP-1': 1, 'RP-2': 1 });
    expect(await row(db, 'RP-2')).toMatchObject({ status: 'DONE', attempts: 3 });
    expect(await row(db, 'RP-CAP')).toMatchObject({ status: 'FAILED', attempts: 3 });
    expect(await row(db, 'RP-U')).toMatchObject({ status: 'UNKNOWN' });
  });

  it("reprocess GUID… (#28): the dead-letter runbook's commands as written send the named dead letters under the raised cap, and nothing else", async () => {
    const doc = readFileSync(join(REPO_ROOT, 'docs', 'operating.md'), 'utf8');
    const runbook = doc.slice(doc.indexOf('**Sending it again.**'));
    const [dry, real] = [...runbook.matchAll(/^guidgate (reprocess .*)$/gm)].slice(0, 2).map((m) => m[1]!.split(/\s+/));
    expect(dry).toContain('--dry-run');
    expect(real).not.toContain('--dry-run');
    const named = real!.filter((a) => /^TX-/.test(a));
    expect(named).toHaveLength(2);
    const sim = await simulator();
    const db = await ledgerWith([
      [named[0]!, 'FAILED', { attempts: 5 }], [named[1]!, 'FAILED', { attempts: 5 }],
      ['DL-OTHER', 'FAILED', { attempts: 5 }], ['F-UNDER', 'FAILED'], ['U-1', 'UNKNOWN'],
    ]);
    const asWritten = (args: string[]) => args.map((a) => (a === 'https://core.bank.internal' ? sim.url : a)).concat(['--db', db]);
    const before = snapshot(db);

    const listed = await cli(asWritten(dry!));
    expect([listed.code, listed.stderr]).toEqual([0, '']);
    expect(listed.stdout.split('\n').filter((l) => /^TX-/.test(l)).map((l) => l.split(/\s+/).slice(0, 3))).toEqual(named.map((g) => [g, 'FAILED', 'attempts=5']));
    expect(listed.stdout).toMatch(/candidates=2 max-attempts=6/);
    expect(snapshot(db)).toEqual(before);

    const sent = await cli(asWritten(real!));
    expect([sent.code, sent.stderr, sent.stdout.split('\n')[0]]).toEqual([0, '', 'reprocess: candidates=2 done=2 failed=0 unknown=0 skipped=0 found=0 held=0 withheld=0 ledger-errors=0']);
    expect(sent.stdout).toContain(`done: ${named.join(', ')}`);
    expect(sim.stats().calls).toEqual({ [named[0]!]: 1, [named[1]!]: 1 });
    for (const g of named) expect(await row(db, g)).toMatchObject({ status: 'DONE', attempts: 6 });
    expect(await row(db, 'DL-OTHER')).toMatchObject({ status: 'FAILED', attempts: 5 });
    expect(await row(db, 'F-UNDER')).toMatchObject({ status: 'FAILED', attempts: 1 });

    // Named rows it does not take are said, with why, on stderr and in --json; nothing is sent for them.
    const again = await cli(['reprocess', '--account-url', sim.url, '--max-attempts', '5', '--json', '--db', db, named[0]!, 'DL-OTHER', 'U-1', 'NO-SUCH']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      candidates: 0,
      notTaken: [
        { guid: named[0], why: 'reprocess sends FAILED rows again; this one is DONE' },
        { guid: 'DL-OTHER', why: 'the attempt cap (5) is used up: a person decides (dead letter)' },
        { guid: 'U-1', why: 'reprocess sends FAILED rows again; this one is UNKNOWN' },
        { guid: 'NO-SUCH', why: 'no such GUID in the ledger' },
      ],
    });
    expect(again.stderr).toContain('guidgate reprocess: NO-SUCH not taken: no such GUID in the ledger');
    expect(sim.stats().totalCalls).toBe(2);
    const bad = await cli(['reprocess', '--account-url', sim.url, '--db', db, 'not a guid']);
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining("'not a guid' is not a GUID")]);
  });

  it('purge while the relay runs: a later resend gets E905 with the original code, and the account system is not called', async () => {
    const h = await startHarness(tmp());
    cleanup.add(() => h.close());
    const t = transferBody('PURGE-ME');
    expect((await h.post(t.body)).json()['code']).toBe('0000');
    const p = await cli(['purge', '--retention', '0ms', '--json', '--db', h.db]);
    expect(p.code).toBe(0);
    expect(p.stderr).toMatch(/warning: retention 0ms is under 1d; channels may still resend within it, and a resend after the purge gets E905/);
    const summary = JSON.parse(p.stdout) as Record<string, number>;
    expect(summary).toMatchObject({ candidates: 1, purged: 1, tombstonesRemoved: 0, dryRun: false });
    expect(summary['bytesBefore']).toBeGreaterThan(0);
    const again = await h.post(t.body);
    expect([again.status, again.json()['code'], again.json()['originalCode']]).toEqual([410, 'E905', '0000']);
    expect(h.sim.guidStats('PURGE-ME').calls).toBe(1);
    // The account numbers left the log; the auditor still sees what happened.
    const hist = JSON.parse((await cli(['history', 'PURGE-ME', '--json', '--db', h.db])).stdout) as Array<{ type: string; data: Record<string, unknown> }>;
    expect(hist.map((e) => e.type)).toEqual(['Claimed', 'Sent', 'Answered', 'Purged']);
    expect([hist[0]!.data['request'], hist[2]!.data['response'], hist[3]!.data['code']]).toEqual([null, null, '0000']);
  });

  it('purge never touches RECEIVED, SENT, UNKNOWN or FAILED rows, however old; a dry run changes nothing', async () => {
    const db = await ledgerWith([
      ['OLD-R', 'RECEIVED'], ['OLD-S', 'SENT'], ['OLD-U', 'UNKNOWN'], ['OLD-F', 'FAILED', { attempts: 5 }], ['OLD-D', 'DONE'], ['NEW-D', 'DONE'],
    ], ['NEW-D']);
    const before = snapshot(db);
    const dry = await cli(['purge', '--retention', '1d', '--dry-run', '--db', db]);
    expect([dry.code, dry.stderr]).toEqual([0, '']);
    expect(dry.stdout).toMatch(/^purge \(dry run, nothing changed\): would-purge=1 would-remove-tombstones=0 /);
    expect(snapshot(db)).toEqual(before);

    const p = await cli(['purge', '--retention', '1d', '--db', db]);
    expect(p.code).toBe(0);
    expect(p.stdout).toMatch(/^purge: candidates=1 purged=1 skipped=0 tombstones-removed=0 bytes-before=\d+ bytes-after=\d+$/m);
    const after = snapshot(db);
    const notOldD = (s: typeof before) => ({
      events: s.events.filter((e) => (e as { guid: string }).guid !== 'OLD-D'),
      ledger: s.ledger.filter((e) => (e as { guid: string }).guid !== 'OLD-D'),
    });
    expect(notOldD(after)).toEqual(notOldD(before));
    expect(await row(db, 'OLD-D')).toMatchObject({ status: 'PURGED', request: null });
  });

  it('resolve --dry-run lists the candidates and changes, inquires and sends nothing', async () => {
    const sim = await simulator();
    const db = await ledgerWith([['DRY-U', 'UNKNOWN'], ['DRY-S', 'SENT'], ['DRY-F', 'FAILED']]);
    const before = snapshot(db);
    const r = await cli(['resolve', '--account-url', sim.url, '--min-age', '10m', '--dry-run', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^DRY-U {2}UNKNOWN {2}attempts=1 {2}sent 2020-01-01T00:00:00\.000Z \(\d+d( \d+[hms])? ago\)$/m);
    expect(r.stdout).toMatch(/^resolve \(dry run, nothing changed, nothing inquired\): candidates=1 would-sweep-never-sent=0 would-sweep-orphaned=1 min-age=10m too-young=0$/m);
    const p = await cli(['reprocess', '--account-url', sim.url, '--dry-run', '--json', '--db', db]);
    expect(p.code).toBe(0);
    const listed = JSON.parse(p.stdout) as { candidates: number; rows: Array<Record<string, unknown>> };
    expect([listed.candidates, listed.rows.map((x) => x['guid'])]).toEqual([1, ['DRY-F']]);
    expect(listed.rows[0]).not.toHaveProperty('request');
    expect(snapshot(db)).toEqual(before);
    expect(sim.stats().totalCalls).toBe(0);
  });

  it('resolve, reprocess and purge name the GUIDs: the first few and how many more on a terminal, all of them in --json (#28)', async () => {
    const sim = await simulator();
    const guids = Array.from({ length: 7 }, (_, i) => `NAME-U${i}`);
    const db = await ledgerWith([...guids.map((g) => [g, 'UNKNOWN'] as [string, 'UNKNOWN']), ['NAME-D1', 'DONE'], ['NAME-D2', 'DONE']]);
    // The simulator never saw them: every inquiry says absent, each row becomes FAILED.
    const human = await cli(['resolve', '--account-url', sim.url, '--min-age', '1s', '--limit', '3', '--db', db]);
    expect(human.code).toBe(0);
    expect(human.stdout.split('\n').filter((l) => l.startsWith('  '))).toEqual(['  absent: NAME-U0, NAME-U1, NAME-U2']);
    const json = await cli(['resolve', '--account-url', sim.url, '--min-age', '1s', '--json', '--db', db]);
    expect(JSON.parse(json.stdout)).toMatchObject({ absent: 4, guids: { absent: guids.slice(3) } });

    const reprocess = await cli(['reprocess', '--account-url', sim.url, '--min-age', '0ms', '--db', db]);
    expect(reprocess.code).toBe(0);
    // Each row was FAILED by an inquiry: sent again only after a fresh inquiry says absent, then DONE.
    expect(reprocess.stdout).toMatch(/^reprocess: candidates=7 done=7 /m);
    expect(reprocess.stdout).toContain('\n  done: NAME-U0, NAME-U1, NAME-U2, NAME-U3, NAME-U4 …2 more\n');

    const purge = await cli(['purge', '--retention', '1d', '--db', db]);
    expect(purge.stdout).toContain('\n  purged: NAME-D1, NAME-D2\n');
    const purgeJson = await cli(['purge', '--retention', '0ms', '--dry-run', '--json', '--db', db]);
    expect(JSON.parse(purgeJson.stdout)).toMatchObject({ dryRun: true, candidates: 7, guids: { 'would-purge': guids } });
  });

  it('resolve --dry-run says how many UNKNOWN rows are too young for min-age, and when the first becomes eligible (#28)', async () => {
    const sim = await simulator();
    const db = await ledgerWith([['AGE-OLD', 'UNKNOWN'], ['AGE-Y1', 'UNKNOWN'], ['AGE-Y2', 'UNKNOWN']], ['AGE-Y1', 'AGE-Y2']);
    const young = await row(db, 'AGE-Y1');
    const r = await cli(['resolve', '--account-url', sim.url, '--min-age', '10m', '--dry-run', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^resolve \(dry run, nothing changed, nothing inquired\): candidates=1 .* min-age=10m too-young=2$/m);
    const note = /^2 UNKNOWN rows are younger than min-age 10m, left out: the first becomes eligible at (\S+) \(in 9m \d+s\)$/m.exec(r.stdout);
    expect(note).not.toBeNull();
    expect(Date.parse(note![1]!)).toBe(Math.min(young!.sentAt!, (await row(db, 'AGE-Y2'))!.sentAt!) + 600_000);
    const json = JSON.parse((await cli(['resolve', '--account-url', sim.url, '--min-age', '10m', '--dry-run', '--json', '--db', db])).stdout) as { tooYoung: { count: number; firstEligibleAt: number } };
    expect(json.tooYoung).toMatchObject({ count: 2, firstEligibleAt: Date.parse(note![1]!) });
    expect(sim.stats().totalCalls).toBe(0);
  });

  it('no quiet no-op: a real resolve says what min-age left out; reprocess says why and until when a row is held; a short min-age warns as a short retention does', async () => {
    const sim = await simulator();
    const db = await ledgerWith([['QN-Y1', 'UNKNOWN'], ['QN-Y2', 'UNKNOWN']], ['QN-Y1', 'QN-Y2']);
    const young = Math.min((await row(db, 'QN-Y1'))!.sentAt!, (await row(db, 'QN-Y2'))!.sentAt!);
    const r = await cli(['resolve', '--account-url', sim.url, '--min-age', '10m', '--db', db]);
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(r.stdout).toMatch(/^resolve: candidates=0 processed=0 .* min-age=10m too-young=2$/m);
    const note = /^2 UNKNOWN rows are younger than min-age 10m, left out: the first becomes eligible at (\S+) \(in 9m \d+s\)$/m.exec(r.stdout);
    expect(Date.parse(note![1]!)).toBe(young + 600_000);
    expect(JSON.parse((await cli(['resolve', '--account-url', sim.url, '--min-age', '10m', '--json', '--db', db])).stdout)).toMatchObject({ candidates: 0, tooYoung: { count: 2, firstEligibleAt: young + 600_000 } });
    expect(sim.stats().totalCalls).toBe(0);

    // The warning, worded as purge's: resolve, reprocess and serve take --min-age.
    const zero = await cli(['resolve', '--account-url', sim.url, '--min-age', '0ms', '--db', db]);
    expect([zero.code, zero.stderr]).toEqual([0, 'guidgate resolve: warning: min-age 0ms is under 1m; an inquiry made before the account system shows a transfer says absent, and the transfer may then be sent twice (the min-age trap): lower it only for an account system whose inquiry sees a transfer as soon as it is applied\n']);

    // Rows FAILED by an inquiry (the two above, just now): a resend inquires first, and is held while too young.
    const held = await cli(['reprocess', '--account-url', sim.url, '--min-age', '10m', '--db', db]);
    expect(held.code).toBe(0);
    const failedAt = (await row(db, 'QN-Y1'))!.sentAt!;
    expect(held.stdout.split('\n').filter((l) => l.startsWith('  '))).toEqual([
      '  held: QN-Y1, QN-Y2',
      expect.stringMatching(new RegExp(`^  QN-Y1: held, too soon to ask the account system: its last Sent \\(${new Date(failedAt).toISOString()}\\) is younger than min-age 10m; it may be asked about at ${new Date(failedAt + 600_000).toISOString()} \\(in 9m \\d+s\\)$`)),
      expect.stringMatching(/^  QN-Y2: held, too soon to ask the account system: /),
    ]);
    // Old enough, and the account system cannot be asked: held, because it could not tell.
    const unclear = await cli(['reprocess', '--account-url', await refusedUrl(), '--min-age', '1m', '--db', await ledgerWithFailedByInquiry('QN-OLD')]);
    expect(unclear.stdout).toContain(`\n  QN-OLD: held, the account system could not tell (last Sent ${new Date(LONG_AGO).toISOString()}); not sent again: run reprocess again later\n`);
  });

  it('rebuild --verify: exit 0 on a clean ledger, exit 1 printing the difference on a hand-corrupted row; rebuild repairs it', async () => {
    const db = await ledgerWith([['RB-1', 'DONE'], ['RB-2', 'FAILED', { attempts: 2 }], ['RB-3', 'UNKNOWN']]);
    const clean = await cli(['rebuild', '--verify', '--db', db]);
    expect([clean.code, clean.stdout.trim()]).toEqual([0, 'rebuild --verify: the projection matches the log: differences=0']);

    const raw = new Database(db);
    raw.prepare("UPDATE ledger SET attempts = 7, status = 'FAILED' WHERE guid = 'RB-3'").run();
    raw.prepare("DELETE FROM ledger WHERE guid = 'RB-1'").run();
    raw.close();
    const bad = await cli(['rebuild', '--verify', '--db', db]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toContain('RB-1  missing');
    expect(bad.stdout).toContain('RB-3  differs  status: ledger="FAILED" log="UNKNOWN"; attempts: ledger=7 log=1');
    expect(bad.stdout).toContain('differences=2');
    const json = await cli(['rebuild', '--verify', '--json', '--db', db]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({ equal: false, differences: [{ guid: 'RB-3', kind: 'differs', columns: ['status', 'attempts'] }, { guid: 'RB-1', kind: 'missing' }] });

    const fix = await cli(['rebuild', '--db', db]);
    expect([fix.code, fix.stdout.trim()]).toEqual([0, 'rebuild: the projection was rebuilt from the log: rows=3']);
    expect((await cli(['rebuild', '--verify', '--db', db])).code).toBe(0);
    expect(await row(db, 'RB-3')).toMatchObject({ status: 'UNKNOWN', attempts: 1 });
  });

  it('ledger and stats: tables, JSON, filters; the raw request (account numbers) is never printed', async () => {
    const db = await ledgerWith([['LS-D', 'DONE'], ['LS-U', 'UNKNOWN'], ['LS-F', 'FAILED', { attempts: 5 }], ['LS-R', 'RECEIVED']], ['LS-D']);
    const table = await cli(['ledger', '--db', db]);
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^GUID\s+STATUS\s+CODE\s+ATT\s+CREATED\s+UPDATED\s+AGE$/);
    expect(table.stdout).toMatch(/^LS-U\s+UNKNOWN\s+E901\s+1\s+2020-01-01T00:00:00\.000Z\s+2020-01-01T00:00:00\.000Z\s+\d+d/m);
    expect(table.stdout).toContain('4 rows (DONE 1, FAILED 1, RECEIVED 1, UNKNOWN 1)');
    expect(table.stdout).not.toContain('6222021001');

    const json = await cli(['ledger', '--status', 'unknown,FAILED', '--json', '--db', db]);
    expect(json.code).toBe(0);
    const rows = JSON.parse(json.stdout) as Array<Record<string, unknown>>;
    expect(rows.map((r) => [r['guid'], r['status'], r['attempts']])).toEqual([['LS-F', 'FAILED', 5], ['LS-U', 'UNKNOWN', 1]]);
    expect(rows[0]).not.toHaveProperty('request');
    expect(json.stdout).not.toContain('6222021001');
    const older = JSON.parse((await cli(['ledger', '--older-than', '1d', '--json', '--limit', '2', '--db', db])).stdout) as Array<{ guid: string }>;
    expect(older.map((r) => r.guid)).toEqual(['LS-F', 'LS-R']);
    expect(JSON.parse((await cli(['ledger', '--status', 'PURGED', '--json', '--db', db])).stdout)).toEqual([]);
    const badStatus = await cli(['ledger', '--status', 'LOST', '--db', db]);
    expect(badStatus.code).toBe(2);
    expect(badStatus.stderr).toMatch(/'LOST' is not a status/);

    const stats = await cli(['stats', '--json', '--db', db]);
    expect(stats.code).toBe(0);
    const s = JSON.parse(stats.stdout) as Record<string, any>;
    expect(s['rows']).toEqual({ RECEIVED: 1, SENT: 0, DONE: 1, UNKNOWN: 1, FAILED: 1, PURGED: 0 });
    expect(s['total']).toBe(4);
    expect(s['oldest']['UNKNOWN']['updatedAt']).toBe(LONG_AGO);
    expect(s['deadLetters']).toEqual({ maxAttempts: 5, count: 1 });
    const human = await cli(['stats', '--max-attempts', '6', '--db', db]);
    expect(human.stdout).toMatch(/^UNKNOWN\s+1$/m);
    expect(human.stdout).toMatch(/^oldest UNKNOWN: \d+d( \d+[hms])? \(last change 2020-01-01T00:00:00\.000Z\)$/m);
    expect(human.stdout).toContain('FAILED at the attempt cap (6), needing a person: 0');
  });

  it('ledger: --json shows the operator API\'s row (never the fingerprint nor the answer), --limit says when more rows match, --sort updated is newest first (#28)', async () => {
    const db = await ledgerWith([['SO-A', 'DONE'], ['SO-B', 'UNKNOWN'], ['SO-C', 'FAILED'], ['SO-D', 'DONE']], ['SO-B']);
    const json = await cli(['ledger', '--json', '--db', db]);
    const rows = JSON.parse(json.stdout) as Array<Record<string, unknown>>;
    expect(Object.keys(rows[0]!).sort()).toEqual(['attempts', 'channel', 'code', 'createdAt', 'failedByInquiry', 'guid', 'sentAt', 'status', 'updatedAt']);
    for (const hidden of ['"fingerprint"', '"response"', '"request"', '6222021001']) expect(json.stdout).not.toContain(hidden);
    expect(json.stderr).toBe('');

    const cut = await cli(['ledger', '--limit', '3', '--db', db]);
    expect(cut.code).toBe(0);
    expect(cut.stdout.trim().split('\n').at(-1)).toBe('3 rows (DONE 1, UNKNOWN 1, FAILED 1), by GUID; cut at --limit 3: more rows match (raise --limit, or narrow with --status or --older-than)');
    const whole = await cli(['ledger', '--limit', '4', '--db', db]);
    expect(whole.stdout.trim().split('\n').at(-1)).toBe('4 rows (DONE 2, UNKNOWN 1, FAILED 1), by GUID');
    const cutJson = await cli(['ledger', '--limit', '1', '--json', '--db', db]);
    expect((JSON.parse(cutJson.stdout) as unknown[]).length).toBe(1);
    expect(cutJson.stderr).toContain('guidgate ledger: 1 rows shown, cut at --limit 1: more rows match');

    // SO-B changed now, the others in 2020: newest first, the 2020 ties by GUID descending.
    const sorted = await cli(['ledger', '--sort', 'updated', '--db', db]);
    expect(sorted.stdout.split('\n').slice(1, 5).map((l) => l.split(' ')[0])).toEqual(['SO-B', 'SO-D', 'SO-C', 'SO-A']);
    expect(sorted.stdout).toContain(', newest change first');
    const sortedJson = JSON.parse((await cli(['ledger', '--sort', 'UPDATED', '--limit', '2', '--json', '--db', db])).stdout) as Array<{ guid: string }>;
    expect(sortedJson.map((r) => r.guid)).toEqual(['SO-B', 'SO-D']);
    const bad = await cli(['ledger', '--sort', 'age', '--db', db]);
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining("'age' is not one of guid, updated")]);
  });

  it('SIGTERM mid-run: the rows in flight finish, the summary counts exactly what was done, exit 1', async () => {
    const sim = await simulator();
    const db = join(tmp(), 'ledger.db');
    const old = openLedger(db, { clock: () => LONG_AGO });
    for (let i = 0; i < 2000; i += 500) {
      await Promise.all(Array.from({ length: 500 }, (_, k) => seedRow(old, `SIG-${String(i + k).padStart(4, '0')}`, 'UNKNOWN')));
    }
    await old.close();
    // One inquiry at a time, one fsync per answer: thousands of rows take seconds, so the signal lands mid-run.
    const child = spawn(process.execPath, [join(REPO_ROOT, 'bin', 'guidgate'), 'resolve', '--account-url', sim.url, '--min-age', '1m', '--concurrency', '1', '--json', '--db', db], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GUIDGATE_'))),
    });
    const done = runToEnd(child);
    // Signal once the run is under way (the first rows are settled), not at a guessed moment.
    const watch = new Database(db, { readonly: true });
    const failed = watch.prepare("SELECT COUNT(*) AS n FROM ledger WHERE status = 'FAILED'");
    await waitFor(() => (failed.get() as { n: number }).n > 0, { intervalMs: 25, what: 'the first row settled' });
    watch.close();
    child.kill('SIGTERM');
    const r = await done;
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('SIGTERM: finishing the rows in flight');
    expect(r.stderr).toContain('interrupted; rows not reached are unchanged');
    const summary = JSON.parse(r.stdout) as { candidates: number; absent: number; exitCode: number };
    expect(summary.exitCode).toBe(1);
    expect(summary.absent).toBeGreaterThan(0);
    expect(summary.absent).toBeLessThan(2000);
    const counts = snapshot(db).ledger.reduce<Record<string, number>>((acc, x) => {
      const st = (x as { status: string }).status;
      acc[st] = (acc[st] ?? 0) + 1;
      return acc;
    }, {});
    expect(counts).toEqual({ FAILED: summary.absent, UNKNOWN: 2000 - summary.absent });
  });

  it('exit codes: unknown GUID 1, unopenable ledger 1, bad usage 2; the command line wins over the environment', async () => {
    const dir = tmp();
    const db = await ledgerWith([['EX-1', 'DONE']]);
    const unknown = await cli(['history', 'NOPE-1', '--db', db]);
    expect([unknown.code, unknown.stdout]).toEqual([1, '']);
    expect(unknown.stderr).toContain('no such GUID in the ledger: NOPE-1');

    // A directory exists but is no ledger file.
    const unopenable = await cli(['stats', '--db', dir]);
    expect(unopenable.code).toBe(1);
    expect(unopenable.stderr).toContain(`guidgate stats: cannot open the ledger at ${dir}`);

    expect((await cli(['purge', '--retention', 'a week', '--db', db])).code).toBe(2);
    expect((await cli(['resolve', '--db', db])).code).toBe(2); // --account-url is required
    expect((await cli(['reprocess', '--account-url', 'ftp://x', '--db', db])).code).toBe(2);

    // GUIDGATE_DB names a ledger without EX-1, --db one with it: the flag wins.
    const env = await cli(['history', 'EX-1', '--db', db], { GUIDGATE_DB: join(dir, 'other.db') });
    expect(env.code).toBe(0);
  });
  it('history shows the reconciliation runs that flagged a GUID, since which run; a GUID the ledger never relayed but a run flagged is told, not "no such GUID"', async () => {
    const dir = tmp();
    const db = join(dir, 'ledger.db');
    const store = openLedger(db);
    const done = await seedRow(store, 'REC-1', 'DONE');
    const window = { from: done.createdAt - 1000, to: done.createdAt + 1000, pendingMs: 0 };
    // Twice over the same window: REC-1 has no posting (missing_in_journal), GHOST-1 a posting and no row.
    const journal = [{ guid: 'GHOST-1', appliedAt: done.createdAt }];
    const r1 = await orThrow(store.recordReconciliation(await runOver(dir, [ledgerRecordOf(done)], journal, window)));
    const r2 = await orThrow(store.recordReconciliation(await runOver(dir, [ledgerRecordOf(done)], journal, window)));
    await store.close();

    const human = await cli(['history', 'REC-1', '--db', db]);
    expect(human.code).toBe(0);
    const lines = human.stdout.split('\n').filter((l) => l.includes('reconciled'));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(new RegExp(`reconciled +run ${r1.id} over \\[\\S+, \\S+\\): missing_in_journal P2, first seen in this run`));
    expect(lines[1]).toMatch(new RegExp(`run ${r2.id} over .*missing_in_journal P2, open since run ${r1.id}`));
    expect(human.stdout).toContain('REC-1: 3 events; now DONE 0000; flagged by 2 reconciliation runs');
    // --json is the contract's array of events, unchanged.
    expect((JSON.parse((await cli(['history', 'REC-1', '--json', '--db', db])).stdout) as unknown[]).length).toBe(3);

    const ghost = await cli(['history', 'GHOST-1', '--db', db]);
    expect(ghost.code).toBe(0);
    expect(ghost.stdout).toMatch(/missing_in_ledger P2/);
    expect(ghost.stdout).toContain('GHOST-1: no events in the ledger (guidgate never relayed it); flagged by 2 reconciliation runs');
    expect((await cli(['history', 'NOPE-2', '--db', db])).code).toBe(1);
  });
  it('history shows a StaleAnswer for what it is: an older attempt answered after a later one was sent', async () => {
    const db = join(tmp(), 'ledger.db');
    const store = openLedger(db);
    const t = transferBody('STALE-H');
    for (const c of [
      { type: 'Submit', request: t.body, fingerprint: t.fingerprint, timeoutMs: 1000, maxAttempts: 3 },
      { type: 'RecordTimeout', attempt: 1, reason: 'timeout' },
      { type: 'Resolve', outcome: 'absent' },
      { type: 'Send', timeoutMs: 1000, maxAttempts: 3, minAgeMs: 0, inquiry: { seq: 3, at: 10 ** 13, answer: { kind: 'absent' } } },
      { type: 'RecordAnswer', attempt: 2, code: '0000', response: '{"code":"0000","n":2}', latencyMs: 4 },
      { type: 'RecordAnswer', attempt: 1, code: '0000', response: '{"code":"0000","n":1}', latencyMs: 900 },
    ] as const) await orThrow(store.execute('STALE-H', c));
    await store.close();
    const human = await cli(['history', 'STALE-H', '--db', db]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/ 6 {2}\S+ {2}StaleAnswer +by .*\n {7}!! attempt 1 was answered after attempt 2 was sent: the account system may have applied this transfer twice/);
    expect(human.stdout).toContain('STALE-H: 7 events; now DONE 0000');
    const json = JSON.parse((await cli(['history', 'STALE-H', '--json', '--db', db])).stdout) as Array<{ type: string; data: Record<string, unknown> }>;
    expect(json.at(-1)).toMatchObject({ type: 'StaleAnswer', data: { attempt: 1, currentAttempt: 2, code: '0000', response: '{"code":"0000","n":1}' } });
  });
});
