import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/shared/duration.js';
import { REPO_ROOT } from '../support/children.js';
import { BIN } from '../support/serveProcess.js';
import { useTempDir } from '../support/tmp.js';

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

function parseEnv(text: string): Map<string, string> {
  const vars = new Map<string, string>();
  for (const [i, raw] of text.split('\n').entries()) {
    if (raw.trim() === '' || raw.startsWith('#')) continue;
    const kv = /^(GUIDGATE_[A-Z_]+)=(\S+)$/.exec(raw);
    if (!kv) throw new Error(`line ${i + 1} is not GUIDGATE_FLAG=value: ${raw}`);
    vars.set(kv[1]!, kv[2]!);
  }
  return vars;
}

describe('deploy/: the systemd unit and its environment file', () => {
  const tmp = useTempDir();

  it('runs serve with the environment file, restarts on failure but not on bad usage, and stops with SIGTERM', () => {
    const unit = parseUnit(readFileSync(UNIT, 'utf8'));
    const service = unit.get('Service')!;
    expect(service.get('ExecStart')).toEqual(['/usr/local/bin/guidgate serve']);
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
    const unitText = readFileSync(UNIT, 'utf8').replace('ExecStart=/usr/local/bin/guidgate', `ExecStart=${BIN}`).replace('EnvironmentFile=/etc/guidgate/guidgate.env', `EnvironmentFile=${join(dir, 'guidgate.env')}`);
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
    expect(guidgate('list').stdout).toBe('pay\ttransfer\n');
  });
});
