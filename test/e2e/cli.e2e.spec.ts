/**
 * The command line's own rules (CONTRACT.md §5 v2), driven through `./bin/guidgate` as real processes: which
 * commands may create a ledger, `--version`, environment values, bad usage, closed pipes, terminal safety.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, it, expect } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { freePort, REPO_ROOT, runToEnd, waitForLine } from '../support/children.js';
import { cli, seedRow, withoutGuidgateEnv } from '../support/commandsSeed.js';
import { useTempDir } from '../support/tmp.js';

const LONG_AGO = Date.UTC(2020, 0, 1);

describe('guidgate command line', () => {
  const tmp = useTempDir();
  const ledgerWith = async (guids: string[]): Promise<string> => {
    const db = join(tmp(), 'ledger.db');
    const store = openLedger(db, { clock: () => LONG_AGO });
    for (const guid of guids) await seedRow(store, guid, 'DONE');
    await store.close();
    return db;
  };

  it('only serve creates a ledger: every other command given a missing --db exits 1 with "no ledger at" and creates nothing', async () => {
    const dir = tmp();
    const db = join(dir, 'typo', 'ledger.db');
    const url = 'http://127.0.0.1:9';
    const commands = [
      ['history', 'G-1'], ['ledger'], ['stats'], ['rebuild'], ['rebuild', '--verify'], ['purge'],
      ['resolve', '--account-url', url], ['reprocess', '--account-url', url],
    ];
    for (const args of commands) {
      const r = await cli([...args, '--db', db]);
      expect([args[0], r.code, r.stdout]).toEqual([args[0], 1, '']);
      expect(r.stderr).toContain(`guidgate ${args[0]}: no ledger at ${db}`);
    }
    // Through GUIDGATE_DB as well, and at the default path (./data/guidgate.db under the working directory).
    expect((await cli(['stats'], { GUIDGATE_DB: db })).stderr).toContain(`no ledger at ${db}`);
    const atDefault = await cli(['ledger'], {}, { cwd: dir });
    expect([atDefault.code, atDefault.stderr.trim()]).toEqual([1, 'guidgate ledger: no ledger at ./data/guidgate.db (only guidgate serve creates a ledger: check --db, or start serve on it first)']);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('--version prints the version from package.json, read at run time by the built command', async () => {
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    const r = await cli(['--version']);
    expect([r.code, r.stdout, r.stderr]).toEqual([0, `${version}\n`, '']);
  });

  it('no command (#28): help on stderr and exit 2 (bad usage); help asked for goes to stdout with exit 0', async () => {
    for (const args of [[], ['keys']]) {
      const r = await cli(args);
      expect([args, r.code, r.stdout]).toEqual([args, 2, '']);
      expect(r.stderr).toContain('Usage: guidgate');
    }
    for (const args of [['--help'], ['help'], ['help', 'keys'], ['keys', '--help']]) {
      const r = await cli(args);
      expect([args, r.code, r.stderr]).toEqual([args, 0, '']);
      expect(r.stdout).toContain('Usage: guidgate');
    }
  });

  it('boolean environment variables take 1/0/true/false/yes/no in any case; anything else exits 2 naming the variable', async () => {
    const db = await ledgerWith(['B-1']);
    const human = await cli(['ledger', '--db', db], { GUIDGATE_JSON: '0' });
    expect([human.code, human.stdout.split('\n')[0]]).toEqual([0, expect.stringMatching(/^GUID\s+STATUS/)]);
    const json = await cli(['ledger', '--db', db], { GUIDGATE_JSON: 'Yes' });
    expect([json.code, (JSON.parse(json.stdout) as Array<{ guid: string }>).map((r) => r.guid)]).toEqual([0, ['B-1']]);
    // The command line wins over a false variable.
    expect(JSON.parse((await cli(['ledger', '--json', '--db', db], { GUIDGATE_JSON: 'false' })).stdout)).toHaveLength(1);

    // `0` must not mean "on": a dry run is asked for with 1/true/yes, and `no` really purges.
    const dry = await cli(['purge', '--retention', '1d', '--db', db], { GUIDGATE_DRY_RUN: 'TRUE' });
    expect([dry.code, dry.stdout]).toEqual([0, expect.stringMatching(/^purge \(dry run, nothing changed\): would-purge=1 /)]);
    for (const value of ['maybe', '']) {
      const bad = await cli(['purge', '--retention', '1d', '--db', db], { GUIDGATE_DRY_RUN: value });
      expect([bad.code, bad.stdout]).toEqual([2, '']);
      expect(bad.stderr).toContain(`GUIDGATE_DRY_RUN='${value}' is not a boolean`);
    }
    const real = await cli(['purge', '--retention', '1d', '--db', db], { GUIDGATE_DRY_RUN: 'no' });
    expect([real.code, real.stdout]).toEqual([0, expect.stringMatching(/^purge: candidates=1 purged=1 /)]);
  });

  it('every bad usage exits 2 naming the flag or variable, before anything is opened: zero time limits, non-http(s) URLs, unknown log levels', async () => {
    const dir = tmp();
    const db = join(dir, 'ledger.db');
    const serve = ['serve', '--port', '0', '--db', db];
    const cases: Array<[args: string[], env: Record<string, string>, names: string]> = [
      [[...serve, '--timeout', '0s'], {}, '--timeout'],
      [[...serve, '--busy-timeout', '0ms'], {}, '--busy-timeout'],
      [[...serve, '--body-timeout', '0ms'], {}, '--body-timeout'],
      [[...serve, '--max-connections', '0'], {}, '--max-connections'],
      [[...serve, '--account-url', 'ftp://core:21'], {}, '--account-url'],
      [[...serve, '--log-level', 'loud'], {}, '--log-level'],
      [serve, { GUIDGATE_TIMEOUT: '0ms' }, 'GUIDGATE_TIMEOUT'],
      // An empty variable is no URL: it must not quietly mean "start the bundled simulator instead".
      [serve, { GUIDGATE_ACCOUNT_URL: '' }, 'GUIDGATE_ACCOUNT_URL'],
      [['resolve', '--account-url', 'http://127.0.0.1:9', '--timeout', '0ms', '--db', db], {}, '--timeout'],
      [['reprocess', '--account-url', 'file:///etc/passwd', '--db', db], {}, '--account-url'],
      [['naive', '--port', '0', '--account-url', 'core:8090'], {}, '--account-url'],
      // Half of --grace is the time a claim has to commit and its call to start: under 500 ms is refused everywhere.
      [[...serve, '--grace', '0ms'], {}, '--grace'],
      [[...serve, '--grace', '499ms'], {}, '--grace'],
      [serve, { GUIDGATE_GRACE: '200ms' }, 'GUIDGATE_GRACE'],
      [['resolve', '--account-url', 'http://127.0.0.1:9', '--grace', '300ms', '--db', db], {}, '--grace'],
      [['reprocess', '--account-url', 'http://127.0.0.1:9', '--grace', '0ms', '--db', db], {}, '--grace'],
    ];
    for (const [args, env, names] of cases) {
      const r = await cli(args, env, { killAfterMs: 10_000 });
      expect([args.join(' '), r.code, r.stdout]).toEqual([args.join(' '), 2, '']);
      expect(r.stderr).toContain(names);
    }
    expect(readdirSync(dir)).toEqual([]);
  });

  it('serve takes the new limits and every log level; the smallest grace (500ms) and a zero min-age are legitimate', async () => {
    const dir = tmp();
    const db = join(dir, 'ledger.db');
    const child = spawn(process.execPath, [join(REPO_ROOT, 'bin', 'guidgate'), 'serve', '--port', '0', '--db', db, '--grace', '500ms', '--body-timeout', '2s', '--max-connections', '5', '--log-level', 'TRACE'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: withoutGuidgateEnv(),
    });
    const ended = runToEnd(child);
    await waitForLine(child, 'listening on http://127.0.0.1:');
    child.kill('SIGTERM');
    expect((await ended).code).toBe(0);
    const r = await cli(['resolve', '--account-url', 'https://core.example', '--min-age', '0ms', '--dry-run', '--db', db]);
    expect([r.code, r.stdout.trim()]).toEqual([0, 'resolve (dry run, nothing changed, nothing inquired): candidates=0 would-sweep-never-sent=0 would-sweep-orphaned=0 min-age=0ms too-young=0']);
  });

  it("the simulator reads GUIDGATE_SIMULATOR_* and never the relay's GUIDGATE_* variables", async () => {
    const dir = tmp();
    const [simPort, relayPort] = [await freePort(), await freePort()];
    const relayEnv = { GUIDGATE_PORT: String(relayPort), GUIDGATE_DB: join(dir, 'relay.db'), GUIDGATE_LATENCY: 'not a duration' };
    const child = spawn(process.execPath, [join(REPO_ROOT, 'bin', 'guidgate'), 'simulator'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...withoutGuidgateEnv(), ...relayEnv, GUIDGATE_SIMULATOR_PORT: String(simPort), GUIDGATE_SIMULATOR_LATENCY: '5ms' },
    });
    const ended = runToEnd(child);
    try {
      await waitForLine(child, `simulator listening on http://127.0.0.1:${simPort}`);
    } finally {
      child.kill('SIGTERM');
    }
    const e = await ended;
    expect([e.code, e.stderr]).toEqual([0, '']);
    expect(readdirSync(dir)).toEqual([]);
    const bad = await cli(['simulator'], { GUIDGATE_SIMULATOR_LATENCY: 'soon' }, { killAfterMs: 10_000 });
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining('GUIDGATE_SIMULATOR_LATENCY')]);
  });

  it('output to a closed pipe (`| head -1`) ends the command quietly with exit 0', async () => {
    const db = join(tmp(), 'ledger.db');
    const store = openLedger(db);
    // Far more output than a pipe buffers (64 KiB), so the command is still writing when head has gone.
    for (let i = 0; i < 2000; i += 500) {
      await Promise.all(Array.from({ length: 500 }, (_, k) => seedRow(store, `PIPE-${String(i + k).padStart(4, '0')}`, 'RECEIVED')));
    }
    await store.close();
    for (const args of ['ledger', 'ledger --json']) {
      // pipefail: the pipeline's status is guidgate's, not head's.
      const r = await runToEnd(spawn('bash', ['-c', `set -o pipefail; "${process.execPath}" "${join(REPO_ROOT, 'bin', 'guidgate')}" ${args} --db "${db}" | head -1`], { stdio: ['ignore', 'pipe', 'pipe'], env: withoutGuidgateEnv() }));
      expect([args, r.code, r.stderr, r.stdout.split('\n').length]).toEqual([args, 0, '', 2]);
    }
  });

  it('history and ledger escape C0, DEL and C1 control characters from the ledger; --json stays JSON and escapes them too', async () => {
    const db = join(tmp(), 'ledger.db');
    const store = openLedger(db);
    // An account answer carrying a clear-screen sequence, an 8-bit CSI, DEL and a forged line.
    const response = '{"guid":"ESC-1","code":"0000","message":"\u001b[2J\u009b31mok\u007f\nESC-2  DONE"}';
    await seedRow(store, 'ESC-1', 'DONE', { response });
    await store.close();
    // A hand-edited projection: the code column as the ledger table prints it.
    const raw = new Database(db);
    raw.prepare("UPDATE ledger SET code = char(27) || '[31m' || char(133) WHERE guid = 'ESC-1'").run();
    raw.close();
    const controls = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

    const human = await cli(['history', 'ESC-1', '--db', db]);
    expect(human.code).toBe(0);
    expect(human.stdout).not.toMatch(controls);
    expect(human.stdout).toContain('\\u001b[2J\\u009b31mok\\u007f\\nESC-2  DONE');
    expect(human.stdout).toContain('now DONE \\u001b[31m\\u0085');

    const json = await cli(['history', 'ESC-1', '--json', '--db', db]);
    expect(json.stdout).not.toMatch(controls);
    expect((JSON.parse(json.stdout) as Array<{ type: string; data: { response?: string } }>).find((e) => e.type === 'Answered')?.data.response).toBe(response);

    const table = await cli(['ledger', '--db', db]);
    expect(table.code).toBe(0);
    expect(table.stdout).not.toMatch(controls);
    expect(table.stdout).toMatch(/^ESC-1\s+DONE\s+\\u001b\[31m\\u0085 /m);
    const rows = await cli(['ledger', '--json', '--db', db]);
    expect(rows.stdout).not.toMatch(controls);
    // The operator's row: the code as stored (escaped in the JSON text); the answer is history's to show (#28).
    expect((JSON.parse(rows.stdout) as Array<{ code: string }>)[0]).toMatchObject({ code: '\u001b[31m\u0085' });
  });
});
