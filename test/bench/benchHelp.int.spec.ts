import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT, runToEnd } from '../support/children.js';

/** bench/ files that are modules of the scripts, not scripts: every other one is run as `node dist/bench/X.js`. */
const MODULES = new Set(['autocannon.d.ts', 'benchArgs.ts', 'claimRate.ts', 'listening.ts', 'processCpu.ts', 'throwawayDatabase.ts', 'walFrames.ts']);
const SCRIPTS = readdirSync(join(REPO_ROOT, 'bench'))
  .filter((name) => name.endsWith('.ts') && !MODULES.has(name))
  .map((name) => name.replace(/\.ts$/, ''));

const run = (script: string, ...args: string[]) => runToEnd(spawn(process.execPath, [join(REPO_ROOT, 'dist', 'bench', `${script}.js`), ...args], { stdio: ['ignore', 'pipe', 'pipe'] }));

describe('every bench script says how it is used', () => {
  it('finds the scripts', () => {
    expect(SCRIPTS).toEqual(expect.arrayContaining(['bench', 'appendBench', 'opsBench', 'graceWindow', 'writePath', 'fillLedger']));
  });

  it.each(SCRIPTS)('%s --help: its usage, every option with what it does, exit 0, nothing run', async (script) => {
    const r = await run(script, '--help');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^(node dist\/bench\/\S+\.js|npm run \S+ --) \[options\]/);
    expect(r.stdout).toMatch(/^ {2}--\S+.* {2,}\S/m);
    expect(r.stderr).toBe('');
  });

  it('an unknown option is bad usage: said with the usage on stderr, exit 2', async () => {
    const r = await run('appendBench', '--secnds', '1');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^Unknown option '--secnds'/);
    expect(r.stderr).toContain('--seconds N');
    expect(r.stdout).toBe('');
  });
});
