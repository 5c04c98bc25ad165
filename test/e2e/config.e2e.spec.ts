/**
 * `--config PATH` (GUIDGATE_CONFIG) as an operator uses it (CONTRACT.md §5): one file of GUIDGATE_NAME=value lines
 * in systemd's EnvironmentFile format for the unit and the cron lines, read by every command through
 * `./bin/guidgate` as a real process. Precedence: the flag, the environment, the file, the default.
 */
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openLedger } from '../support/ledgerStore.js';
import { freePort, REPO_ROOT, runToEnd, waitForLine } from '../support/children.js';
import { BIN } from '../support/serveProcess.js';
import { cli, seedRow, withoutGuidgateEnv } from '../support/commandsSeed.js';
import { useTempDir } from '../support/tmp.js';

describe('guidgate --config: one file for the unit and the cron lines', () => {
  const tmp = useTempDir();
  /** A ledger file (in a folder whose name has a blank) with one DONE row. */
  const ledger = async (): Promise<string> => {
    const dir = join(tmp(), 'var lib');
    mkdirSync(dir);
    const db = join(dir, 'ledger.db');
    const store = openLedger(db);
    await seedRow(store, 'CFG-1', 'DONE');
    await store.close();
    return db;
  };
  const configFile = (text: string, mode = 0o640): string => {
    const path = join(tmp(), 'guidgate.env');
    writeFileSync(path, text);
    chmodSync(path, mode);
    return path;
  };
  const minAgeOf = (stdout: string): string | undefined => / min-age=(\S+)/.exec(stdout)?.[1];

  it('the flag wins over the environment, the environment over the file, the file over the default; --config or GUIDGATE_CONFIG, before or after the command', async () => {
    const db = await ledger();
    // systemd's quoting: the path with a blank in double quotes, a comment, blanks around the name and the value.
    const file = configFile(`# the relay's settings\nGUIDGATE_DB="${db}"\n  GUIDGATE_ACCOUNT_URL = http://127.0.0.1:9\nGUIDGATE_MIN_AGE=7m\n`);
    const resolve = (args: string[], env: Record<string, string> = {}) => cli(['resolve', '--dry-run', ...args], env);

    const fromFile = await resolve(['--config', file]);
    // --db and the required --account-url came from the file too.
    expect([fromFile.code, fromFile.stderr, minAgeOf(fromFile.stdout)]).toEqual([0, '', '7m']);
    expect(minAgeOf((await cli(['--config', file, 'resolve', '--dry-run'])).stdout)).toBe('7m');
    expect(minAgeOf((await resolve([], { GUIDGATE_CONFIG: file })).stdout)).toBe('7m');
    expect(minAgeOf((await resolve(['--config', file], { GUIDGATE_MIN_AGE: '8m' })).stdout)).toBe('8m');
    expect(minAgeOf((await resolve(['--config', file, '--min-age', '9m'], { GUIDGATE_MIN_AGE: '8m' })).stdout)).toBe('9m');
    // No file: the default, and --account-url is missing again.
    expect(minAgeOf((await resolve(['--db', db, '--account-url', 'http://127.0.0.1:9'])).stdout)).toBe('1m');
    expect((await resolve(['--db', db])).code).toBe(2);

    // Booleans as the environment takes them; the environment's 0 wins over the file's yes.
    const json = configFile(`GUIDGATE_DB='${db}'\nGUIDGATE_JSON=yes\n`);
    expect(JSON.parse((await cli(['ledger', '--config', json])).stdout)).toEqual([expect.objectContaining({ guid: 'CFG-1', status: 'DONE' })]);
    expect((await cli(['ledger', '--config', json], { GUIDGATE_JSON: '0' })).stdout).toMatch(/^GUID\s+STATUS/);
  });

  it('a typo, a bad value for this command, the config variable itself: exit 2 naming the file and the line; a variable only other commands take is left alone', async () => {
    const db = await ledger();
    const typo = configFile(`GUIDGATE_DB=${db}\n\n# retention\nGUIDGATE_RETENTON=7d\n`);
    expect(await cli(['purge', '--dry-run', '--config', typo])).toEqual({ code: 2, stdout: '', stderr: `error: ${typo} line 4: GUIDGATE_RETENTON is no variable of any guidgate command (a typo?)\n` });

    // GUIDGATE_PORT and GUIDGATE_SETTLE_EVERY are serve's: purge leaves them, serve refuses the bad port.
    const serveOnly = configFile(`GUIDGATE_DB=${db}\nGUIDGATE_PORT=eighty\nGUIDGATE_SETTLE_EVERY=often\n`);
    const purge = await cli(['purge', '--dry-run', '--config', serveOnly]);
    expect([purge.code, purge.stderr]).toEqual([0, '']);
    expect(await cli(['serve', '--config', serveOnly])).toEqual({ code: 2, stdout: '', stderr: `error: ${serveOnly} line 2: GUIDGATE_PORT: 'eighty' is not a whole number\n` });

    const badMinAge = configFile(`GUIDGATE_DB=${db}\nGUIDGATE_ACCOUNT_URL=http://127.0.0.1:9\nGUIDGATE_MIN_AGE=soon\n`);
    expect((await cli(['resolve', '--config', badMinAge])).stderr).toBe(`error: ${badMinAge} line 3: GUIDGATE_MIN_AGE: 'soon' is not a duration (500ms, 30s, 5m, 2h, 7d)\n`);
    const badBoolean = configFile(`GUIDGATE_DB=${db}\nGUIDGATE_JSON=maybe\n`);
    expect((await cli(['ledger', '--config', badBoolean])).stderr).toBe(`error: ${badBoolean} line 2: GUIDGATE_JSON='maybe' is not a boolean (1, 0, true, false, yes, no)\n`);
    const noEquals = configFile(`GUIDGATE_DB ${db}\n`);
    expect((await cli(['ledger', '--config', noEquals])).stderr).toBe(`error: ${noEquals} line 1: not NAME=value (no '=')\n`);
    const nested = configFile(`GUIDGATE_CONFIG=/etc/other.env\n`);
    expect(await cli(['ledger', '--config', nested])).toMatchObject({ code: 2, stderr: `error: ${nested} line 1: GUIDGATE_CONFIG names the config file; a config file cannot name another\n` });
    expect(await cli(['ledger', '--config', join(tmp(), 'missing.env')])).toMatchObject({ code: 2, stderr: expect.stringContaining('cannot read it (ENOENT)') });
    expect(existsSync(join(tmp(), 'data'))).toBe(false);
  });

  it('a secret in a file others may read is refused, for every command, its value never shown; 0640 is fine', async () => {
    const db = await ledger();
    const password = 'hunter2-do-not-print';
    for (const [line, says] of [
      [`GUIDGATE_DB=postgres://guidgate:${password}@127.0.0.1:1/ledger`, 'GUIDGATE_DB holds a URL with a password'],
      [`GUIDGATE_TLS_KEY=/etc/guidgate/tls/${password}.pem`, 'GUIDGATE_TLS_KEY is a secret'],
      [`GUIDGATE_NOTIFY_SECRET_FILE=/etc/guidgate/${password}`, 'GUIDGATE_NOTIFY_SECRET_FILE is a secret'],
    ] as const) {
      const file = configFile(`GUIDGATE_DB=${db}\n${line}\n`, 0o644);
      const r = await cli(['stats', '--config', file]);
      expect([r.code, r.stdout]).toEqual([2, '']);
      expect(r.stderr).toBe(`error: ${file} line 2: ${says}, and others may read the file: chmod o-r ${file} (give it to root and the service's group, mode 0640)\n`);
    }
    // Readable by the owner and the group only: taken (the TLS key is serve's, stats leaves it).
    const file = configFile(`GUIDGATE_DB=${db}\nGUIDGATE_TLS_KEY=/etc/guidgate/tls/key.pem\n`, 0o640);
    expect((await cli(['stats', '--config', file])).code).toBe(0);
    // A bad value of a secret is refused without showing it.
    const badUrl = configFile(`GUIDGATE_DB=${db}\nGUIDGATE_ACCOUNT_URL=ftp://ops:${password}@core\n`, 0o600);
    const refused = await cli(['resolve', '--config', badUrl]);
    expect([refused.code, refused.stderr]).toEqual([2, `error: ${badUrl} line 2: GUIDGATE_ACCOUNT_URL: not a valid value for --account-url (not shown: it may hold a secret)\n`]);
  });

  it('serve and keys read it too; the shipped deploy/guidgate.env is taken by every command', async () => {
    const dir = tmp();
    const port = await freePort();
    const keys = join(dir, 'keys');
    const file = configFile(`GUIDGATE_DB=${join(dir, 'ledger.db')}\nGUIDGATE_PORT=${port}\nGUIDGATE_KEYS=${keys}\nGUIDGATE_LOG_LEVEL=warn\n`);
    const added = await cli(['keys', 'add', 'ops', '--scopes', 'read', '--config', file]);
    expect([added.code, existsSync(keys)]).toEqual([0, true]);
    const serve = spawn(process.execPath, [BIN, 'serve', '--config', file], { stdio: ['ignore', 'pipe', 'pipe'], env: withoutGuidgateEnv() });
    const ended = runToEnd(serve);
    await waitForLine(serve, `listening on http://127.0.0.1:${port}`);
    // Keys on, from the file: /metrics needs a token.
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(401);
    serve.kill('SIGTERM');
    expect((await ended).code).toBe(0);

    const shipped = join(REPO_ROOT, 'deploy', 'guidgate.env');
    for (const args of [['ledger'], ['stats'], ['purge', '--dry-run'], ['resolve', '--dry-run'], ['reprocess', '--dry-run'], ['history', 'G-1'], ['rebuild', '--verify']]) {
      const r = await cli([...args, '--config', shipped]);
      // Taken: the run goes on to find no ledger at the file's GUIDGATE_DB (exit 1), never bad usage.
      expect([args[0], r.code, r.stderr]).toEqual([args[0], 1, expect.stringContaining('no ledger at /var/lib/guidgate/ledger.db')]);
    }
  });
});
