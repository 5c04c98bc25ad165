import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/shared/duration.js';
import { parseEnvironmentFile } from '../../src/cli/environmentFile.js';
import { REPO_ROOT } from '../support/children.js';
import { BIN } from '../support/serveProcess.js';
import { useTempDir } from '../support/tmp.js';
import { notifySystemd } from '../../src/wiring/systemdNotify.js';
import { bindNotifySocket, python3, valueOf } from '../support/notifySocket.js';
import { waitFor } from '../support/waitFor.js';

const UNIT = join(REPO_ROOT, 'deploy', 'guidgate.service');
const ENV = join(REPO_ROOT, 'deploy', 'guidgate.env');
const SYSUSERS = join(REPO_ROOT, 'deploy', 'guidgate.sysusers.conf');
const DEPLOYING = readFileSync(join(REPO_ROOT, 'docs', 'deploying.md'), 'utf8');

/**
 * A systemd tool, or null. Missing under CI=true is a failure (.ci/run installs the package systemd); elsewhere the
 * tests that need it are skipped, saying so.
 */
function systemdTool(name: string): string | null {
  const probe = spawnSync(name, ['--version'], { encoding: 'utf8' });
  if (probe.error === undefined && probe.status === 0) return name;
  if (process.env['CI'] === 'true') throw new Error(`${name} is required under CI=true (Debian package systemd; .ci/run installs it)`);
  console.warn(`SKIPPED: ${name} not found (apt-get install systemd); the unit's systemd checks did not run`);
  return null;
}

/** `[Section]` → key → values (a key may repeat), comments and blank lines skipped, as systemd reads it. */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[([A-Za-z]+)\]$/.exec(line);
    if (header) {
      current = new Map();
      sections.set(header[1]!, current);
      continue;
    }
    const kv = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (!kv || current === undefined) throw new Error(`line ${i + 1} is not KEY=VALUE inside a section: ${raw}`);
    current.set(kv[1]!, [...(current.get(kv[1]!) ?? []), kv[2]!]);
  }
  return sections;
}

/** The environment file as `--config` and systemd read it (src/cli/environmentFile.ts): every line GUIDGATE_FLAG=value. */
function parseEnv(text: string): Map<string, string> {
  const parsed = parseEnvironmentFile(text);
  if (!parsed.ok) throw new Error(`line ${parsed.problem.line}: ${parsed.problem.problem}`);
  for (const a of parsed.assignments) if (!a.name.startsWith('GUIDGATE_')) throw new Error(`line ${a.line}: ${a.name} is not GUIDGATE_FLAG=value`);
  return new Map(parsed.assignments.map((a) => [a.name, a.value]));
}

describe('deploy/: the systemd unit and its environment file', () => {
  const tmp = useTempDir();

  it('runs serve with the environment file, restarts on failure but not on bad usage, and stops with SIGTERM', () => {
    const unit = parseUnit(readFileSync(UNIT, 'utf8'));
    const service = unit.get('Service')!;
    // Ready when serve says so (READY=1 once /healthz would say ok), from systemd-notify, its child; watched.
    expect(service.get('Type')).toEqual(['notify']);
    expect(service.get('NotifyAccess')).toEqual(['all']);
    expect(parseDuration(service.get('WatchdogSec')?.[0] ?? '')).toBeGreaterThan(0);
    // One config file: systemd gives it as the environment, and serve checks it as every command does (--config).
    expect(service.get('ExecStart')).toEqual(['/usr/local/bin/guidgate serve --config /etc/guidgate/guidgate.env']);
    // `systemctl reload` sends the HUP that re-reads the keys file.
    expect(service.get('ExecReload')).toEqual(['/bin/kill -HUP $MAINPID']);
    expect(service.get('EnvironmentFile')).toEqual(['/etc/guidgate/guidgate.env']);
    expect(service.get('Restart')).toEqual(['on-failure']);
    expect(service.get('RestartPreventExitStatus')).toEqual(['2']);
    expect(service.get('KillSignal')).toEqual(['SIGTERM']);
    expect(unit.get('Install')?.get('WantedBy')).toEqual(['multi-user.target']);
  });

  it('sets serve through GUIDGATE_ variables, settling in the background included', () => {
    const env = parseEnv(readFileSync(ENV, 'utf8'));
    expect(env.get('GUIDGATE_DB')).toBe('/var/lib/guidgate/ledger.db');
    expect(env.has('GUIDGATE_ACCOUNT_URL')).toBe(true);
    for (const key of ['GUIDGATE_TIMEOUT', 'GUIDGATE_GRACE', 'GUIDGATE_SETTLE_EVERY', 'GUIDGATE_MIN_AGE']) {
      expect(parseDuration(env.get(key) ?? ''), key).not.toBeNull();
    }
    // The database lives in the unit's StateDirectory.
    const state = parseUnit(readFileSync(UNIT, 'utf8')).get('Service')!.get('StateDirectory');
    expect(env.get('GUIDGATE_DB')!.startsWith(`/var/lib/${state?.[0]}/`)).toBe(true);
    // The continuity marks in another StateDirectory, not inside the data directory that a restore puts back.
    const marks = env.get('GUIDGATE_CONTINUITY_DIR');
    expect(state?.map((d) => `/var/lib/${d}`)).toContain(marks);
    expect(marks).not.toBe(`/var/lib/${state?.[0]}`);
    expect(`${marks}/`.startsWith(`/var/lib/${state?.[0]}/`)).toBe(false);
  });

  it('runs guidgate where the docs\' install puts it, as the user the sysusers.d snippet makes', () => {
    const service = parseUnit(readFileSync(UNIT, 'utf8')).get('Service')!;
    // docs/deploying.md installs with an explicit prefix; a global install puts the command in {prefix}/bin
    // (test/e2e/pack.e2e.spec.ts installs the tarball that way and runs {prefix}/bin/guidgate).
    const prefix = /npm install -g --prefix (\S+) /.exec(DEPLOYING)?.[1];
    expect(prefix, 'docs/deploying.md: npm install -g --prefix …').toBeDefined();
    expect(service.get('ExecStart')?.[0]?.split(' ')[0]).toBe(`${prefix}/bin/guidgate`);
    expect(DEPLOYING).toContain('deploy/guidgate.sysusers.conf /etc/sysusers.d/guidgate.conf');
    // The user exists before the service runs: a sysusers.d line for it, its home the StateDirectory.
    const users = readFileSync(SYSUSERS, 'utf8').split('\n').filter((l) => /^u\s/.test(l)).map((l) => l.split(/\s+/));
    expect(users).toHaveLength(1);
    expect(users[0]![1]).toBe(service.get('User')?.[0]);
    expect(service.get('Group')).toEqual(service.get('User'));
    expect(users[0]!.at(-1)).toBe(`/var/lib/${service.get('StateDirectory')?.[0]}`);
    expect(service.get('DynamicUser')).toBeUndefined();
  });

  const analyze = systemdTool('systemd-analyze');
  it.skipIf(analyze === null)('passes systemd-analyze verify, with ExecStart pointed at an executable that exists here', () => {
    const dir = tmp();
    // verify checks that ExecStart's program exists and is executable; /usr/local/bin/guidgate is not installed
    // on the test machine, so a copy of the unit runs the checkout's bin/guidgate, every other line as shipped.
    const unitText = readFileSync(UNIT, 'utf8').replace('ExecStart=/usr/local/bin/guidgate', `ExecStart=${BIN}`).replaceAll('/etc/guidgate/guidgate.env', join(dir, 'guidgate.env'));
    expect(unitText).toContain(`ExecStart=${BIN} serve`);
    copyFileSync(ENV, join(dir, 'guidgate.env'));
    const unitPath = join(dir, 'guidgate.service');
    writeFileSync(unitPath, unitText);
    const r = spawnSync(analyze!, ['verify', '--man=no', unitPath], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    // verify exits 0 on mere warnings ("Unknown key", "Failed to parse"): none may name our unit.
    expect(`${r.stdout}${r.stderr}`).not.toContain('guidgate.service');
    // And the unit as shipped fails only for the missing program (nothing else is wrong with it).
    const shipped = spawnSync(analyze!, ['verify', '--man=no', UNIT], { encoding: 'utf8' });
    if (!existsSync('/usr/local/bin/guidgate')) {
      const complaints = `${shipped.stdout}${shipped.stderr}`.split('\n').filter((l) => l.includes('guidgate.service'));
      expect(complaints).toEqual(['guidgate.service: Command /usr/local/bin/guidgate is not executable: No such file or directory']);
    }
  });

  const sysusers = systemdTool('systemd-sysusers');
  it.skipIf(sysusers === null)('the sysusers.d snippet makes a system user guidgate with no login shell', () => {
    const root = tmp();
    mkdirSync(join(root, 'etc'));
    const r = spawnSync(sysusers!, [`--root=${root}`, SYSUSERS], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const passwd = readFileSync(join(root, 'etc', 'passwd'), 'utf8').split('\n').find((l) => l.startsWith('guidgate:'));
    const [name, , uid, , , home, shell] = passwd!.split(':');
    expect({ name, home, shell }).toEqual({ name: 'guidgate', home: '/var/lib/guidgate', shell: '/usr/sbin/nologin' });
    expect(Number(uid)).toBeLessThan(1000);
    expect(readFileSync(join(root, 'etc', 'group'), 'utf8')).toMatch(/^guidgate:x:\d+:$/m);
  });

  // The docs' keys step: `keys add` as root makes the file 0600 and root's, and says so; the chown the docs give is
  // what lets the service's user read it; later keys commands keep that owner (remove writes a new file with the
  // old one's owner). Tried with `nobody`.
  const asRoot = process.getuid?.() === 0 && spawnSync('runuser', ['--help']).status === 0;
  it.skipIf(!asRoot)('a keys file made by root is readable by the service\'s user after the documented chown, which add and remove keep', () => {
    expect(DEPLOYING).toContain('chown guidgate:guidgate /etc/guidgate/keys');
    const dir = tmp();
    chmodSync(dir, 0o755);
    const keys = join(dir, 'keys');
    const guidgate = (...args: string[]) => spawnSync(process.execPath, [BIN, 'keys', ...args, '--keys', keys], { encoding: 'utf8' });
    const readable = () => spawnSync('runuser', ['-u', 'nobody', '--', 'test', '-r', keys]).status === 0;
    const chown = () => expect(spawnSync('chown', ['nobody:nogroup', keys]).status).toBe(0);

    const first = guidgate('add', 'ops', '--scopes', 'read,admin');
    expect(first.status).toBe(0);
    expect(first.stdout).toMatch(/^gg_[A-Za-z0-9_-]{43}\n$/);
    expect(first.stderr).toBe(`guidgate keys: created ${keys} owned by root (mode 0600): give it to the user serve runs as, or serve cannot read it (chown guidgate:guidgate ${keys})\n`);
    expect(statSync(keys).mode & 0o777).toBe(0o600);
    expect(readable()).toBe(false);
    chown();
    expect(readable()).toBe(true);
    // add appends: the owner stays, and nothing more is said.
    const second = guidgate('add', 'pay', '--scopes', 'transfer');
    expect([second.status, second.stderr]).toEqual([0, '']);
    expect(readable()).toBe(true);
    // remove writes the file anew, as root, with the old file's owner and mode.
    expect(guidgate('remove', 'ops').status).toBe(0);
    expect(readable()).toBe(true);
    expect(statSync(keys).mode & 0o777).toBe(0o600);
    expect(guidgate('list').stdout).toMatch(/^pay\ttransfer\t\S+Z\t-\n$/);
  });

  it.skipIf(analyze === null)('is confined: systemd-analyze security scores it 4.0 or lower, with MemoryDenyWriteExecute off (V8\'s JIT writes code it then runs)', () => {
    const dir = tmp();
    const unitPath = join(dir, 'guidgate.service');
    copyFileSync(UNIT, unitPath);
    const r = spawnSync(analyze!, ['security', '--offline=true', '--no-pager', unitPath], { encoding: 'utf8' });
    const score = Number(/Overall exposure level for guidgate\.service: (\d+\.\d+)/.exec(r.stdout)?.[1]);
    console.info(`systemd-analyze security --offline=true deploy/guidgate.service: ${score}`);
    expect(score, r.stdout + r.stderr).toBeLessThanOrEqual(4.0);
    expect(r.stdout).toMatch(/✗ MemoryDenyWriteExecute=/);
    expect(parseUnit(readFileSync(UNIT, 'utf8')).get('Service')!.get('MemoryDenyWriteExecute')).toBeUndefined();
  });

  /**
   * The system calls the unit's SystemCallFilter= lines allow, as systemd reads them: the first line an allow list,
   * each later one adding (or, with ~, taking away) its calls and groups, a group expanded by systemd-analyze.
   */
  function allowedCalls(filterLines: readonly string[]): Set<string> {
    const expand = (name: string): string[] => {
      if (!name.startsWith('@')) return [name];
      const listed = spawnSync(analyze!, ['syscall-filter', '--no-pager', name], { encoding: 'utf8' }).stdout.split('\n').slice(1);
      return listed.map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#')).flatMap(expand);
    };
    const allowed = new Set<string>();
    for (const line of filterLines) {
      const deny = line.startsWith('~');
      for (const item of line.replace(/^~/, '').split(/\s+/).filter(Boolean)) {
        for (const call of expand(item)) {
          if (deny) allowed.delete(call);
          else allowed.add(call);
        }
      }
    }
    return allowed;
  }

  const strace = spawnSync('strace', ['-V']).status === 0 ? 'strace' : null;
  it.skipIf(analyze === null || strace === null || python3() === null)(
    'every system call serve makes (transfers, metrics, the console, systemd-notify, shutdown) is one the unit\'s SystemCallFilter allows',
    async () => {
      const filter = parseUnit(readFileSync(UNIT, 'utf8')).get('Service')!.get('SystemCallFilter') ?? [];
      expect(filter.length).toBeGreaterThan(0);
      const allowed = allowedCalls(filter);
      expect(allowed.has('read') && allowed.has('setuid') === false).toBe(true);
      const dir = tmp();
      // As the unit runs it: not as root (SQLite, for one, gives its files to the database's owner only as root).
      const asUser = process.getuid?.() === 0 ? ['-u', 'nobody'] : [];
      if (asUser.length > 0) {
        chmodSync(dir, 0o777);
        chownSync(dir, 65534, 65534);
      }
      const socket = await bindNotifySocket(dir, python3()!);
      const trace = join(dir, 'strace.txt');
      const child = spawn('strace', ['-f', '-qq', ...asUser, '-o', trace, process.execPath, BIN, 'serve', '--port', '0', '--db', join(dir, 'ledger.db'), '--log-level', 'warn'], {
        stdio: ['ignore', 'pipe', 'pipe'],
        // Its continuity marks in a folder of its own: the run's shared folder may be root's, closed to the service user.
        env: { ...process.env, NOTIFY_SOCKET: socket.path, WATCHDOG_USEC: '200000', GUIDGATE_CONTINUITY_DIR: join(dir, 'continuity') },
      });
      try {
        let out = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString()));
        const url = await waitFor(() => /listening on (http:\/\/\S+)/.exec(out)?.[1], { timeoutMs: 60_000, what: 'serve listening under strace' });
        await socket.awaitKey('READY');
        for (let i = 0; i < 3; i++) {
          const r = await fetch(`${url}/v1/transfers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ guid: `sys-${i}`, from: '6222021001', to: '6222021002', amount: 1500 }) });
          expect(r.status).toBe(200);
        }
        for (const path of ['/metrics', '/healthz', '/console/', '/v1/stats']) expect((await fetch(`${url}${path}`)).status).toBe(200);
        await waitFor(() => socket.messages().filter((m) => valueOf(m, 'WATCHDOG') === '1').length >= 2, { what: 'watchdog pings' });
        // The relay is strace's child: SIGTERM to it, as systemd sends it.
        const pid = Number(readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(' ')[0]);
        process.kill(pid, 'SIGTERM');
        await new Promise((r) => child.once('exit', r));
        await socket.awaitKey('STOPPING');
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL');
        await socket.close();
      }
      const used = new Set<string>();
      for (const line of readFileSync(trace, 'utf8').split('\n')) {
        const m = /^\d+\s+([a-z0-9_]+)\(/.exec(line);
        if (m !== null) used.add(m[1]!);
      }
      expect(used.size).toBeGreaterThan(30);
      expect([...used].filter((call) => !allowed.has(call)).sort()).toEqual([]);
    },
    120_000,
  );

  it.skipIf(python3() === null || spawnSync('systemd-notify', ['--version']).status !== 0)(
    'READY=1 only once the readiness /healthz answers with holds; until then a STATUS saying why; STOPPING=1 at the end (a notify socket of the test\'s own)',
    async () => {
      const socket = await bindNotifySocket(tmp(), python3()!);
      let why: string | null = 'database is locked';
      const warnings: string[] = [];
      const notifier = notifySystemd({
        env: { ...process.env, NOTIFY_SOCKET: socket.path },
        readiness: async () => why,
        readyStatus: 'listening on http://127.0.0.1:8080',
        log: { warn: (_l, m) => void warnings.push(m) },
        checkEveryMs: 20,
      });
      try {
        expect(notifier).not.toBeNull();
        const status = await socket.awaitKey('STATUS');
        expect(valueOf(status, 'STATUS')).toBe('not ready (/healthz would say 503): database is locked');
        why = 'no synchronous standby';
        await waitFor(() => socket.messages().some((m) => valueOf(m, 'STATUS')?.endsWith('no synchronous standby')), { what: 'the new reason' });
        expect(socket.messages().filter((m) => valueOf(m, 'READY') !== undefined)).toEqual([]);
        why = null;
        await notifier!.ready;
        const ready = await socket.awaitKey('READY');
        expect(ready).toEqual([['READY', '1'], ['STATUS', 'listening on http://127.0.0.1:8080']]);
        await notifier!.stopping();
        expect(socket.messages().at(-1)).toEqual([['STATUS', 'stopping: finishing the calls in flight'], ['STOPPING', '1']]);
        expect(warnings).toEqual([]);
        // Outside systemd (no NOTIFY_SOCKET) nothing is started.
        expect(notifySystemd({ env: {}, readiness: async () => null, readyStatus: '', log: { warn: () => undefined } })).toBeNull();
      } finally {
        await notifier?.stopping();
        await socket.close();
      }
    },
  );
});
