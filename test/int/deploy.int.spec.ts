import { spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/shared/duration.js';
import { REPO_ROOT } from '../support/children.js';
import { BIN } from '../support/serveProcess.js';
import { useTempDir } from '../support/tmp.js';

const UNIT = join(REPO_ROOT, 'deploy', 'guidgate.service');
const ENV = join(REPO_ROOT, 'deploy', 'guidgate.env');

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

  const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
  it.skipIf(analyze.error !== undefined || analyze.status !== 0)('passes systemd-analyze verify (pointed at this checkout)', () => {
    const dir = tmp();
    // verify checks that ExecStart's binary exists: point it at the repository's.
    const unitText = readFileSync(UNIT, 'utf8').replace('/usr/local/bin/guidgate', BIN).replace('/etc/guidgate/guidgate.env', join(dir, 'guidgate.env'));
    copyFileSync(ENV, join(dir, 'guidgate.env'));
    const unitPath = join(dir, 'guidgate.service');
    writeFileSync(unitPath, unitText);
    const r = spawnSync('systemd-analyze', ['verify', unitPath], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    // verify exits 0 on mere warnings ("Unknown key", "Failed to parse"): none may name our unit.
    expect(`${r.stdout}${r.stderr}`).not.toContain(unitPath);
  });
});
