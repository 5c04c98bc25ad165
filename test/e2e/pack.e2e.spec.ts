import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { CONSOLE_ASSETS } from '../../src/relay/console.js';
import { REPO_ROOT } from '../support/children.js';
import { useTempDir } from '../support/tmp.js';

/**
 * The package as a channel team or an operator gets it: `npm run tarball` (scripts/packTarball.mjs), installed from
 * the tarball, on this Node, with npm's own warnings read: none about an engine (EBADENGINE) or about guidgate's
 * own scripts. Where no
 * prebuilt better-sqlite3 can be downloaded (this machine), its install would compile SQLite from source
 * (about 5 minutes); the test hands it the binary `npm ci` already built for this very Node, as a local
 * prebuild (prebuild-install's `npm_config_better_sqlite3_local_prebuilds`), so the install takes seconds
 * and still runs every install step of the tarball. GUIDGATE_PACK_TEST=0 skips it.
 */
const enabled = process.env['GUIDGATE_PACK_TEST'] !== '0';
let installEnv: NodeJS.ProcessEnv = {};

/** A prebuild-install tarball of the better-sqlite3 binary in this checkout's node_modules. */
async function localPrebuild(dir: string): Promise<string> {
  const pkg = join(REPO_ROOT, 'node_modules', 'better-sqlite3');
  const { version: sqliteVersion } = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { version: string };
  const stage = join(dir, 'prebuild-stage');
  mkdirSync(join(stage, 'build', 'Release'), { recursive: true });
  copyFileSync(join(pkg, 'build', 'Release', 'better_sqlite3.node'), join(stage, 'build', 'Release', 'better_sqlite3.node'));
  const out = join(dir, 'prebuilds');
  mkdirSync(out);
  const name = `better-sqlite3-v${sqliteVersion}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const tar = await run('tar', ['-czf', join(out, name), '-C', stage, 'build'], dir, 60_000);
  expect(tar.status, tar.stderr).toBe(0);
  return out;
}
const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
const { satisfies } = createRequire(import.meta.url)('semver') as { satisfies(version: string, range: string): boolean };

/** npm's warnings that would make a user doubt the install: an engine this Node does not meet, install scripts it asks to allow. */
const npmComplaints = (stderr: string): string[] => stderr.split('\n').filter((l) => /EBADENGINE|install-scripts/.test(l));

/** `name@version needs node RANGE` for every installed package under `dir/node_modules` whose engines refuse this Node. */
function enginesRefusing(dir: string): string[] {
  const refusing: string[] = [];
  const visit = (modules: string): void => {
    if (!existsSync(modules)) return;
    for (const entry of readdirSync(modules)) {
      if (entry.startsWith('.')) continue;
      const names = entry.startsWith('@') ? readdirSync(join(modules, entry)).map((n) => join(entry, n)) : [entry];
      for (const name of names) {
        const pkgFile = join(modules, name, 'package.json');
        if (!existsSync(pkgFile)) continue;
        const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as { version?: string; engines?: { node?: string } };
        if (pkg.engines?.node !== undefined && !satisfies(process.versions.node, pkg.engines.node)) refusing.push(`${name}@${pkg.version ?? '?'} needs node ${pkg.engines.node}`);
        visit(join(modules, name, 'node_modules'));
      }
    }
  };
  visit(join(dir, 'node_modules'));
  return refusing;
}

interface Ran {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a command to its end (asynchronously: a blocked worker would miss vitest's own heartbeats for minutes). */
function run(cmd: string, args: string[], cwd: string, timeoutMs: number): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, npm_config_update_notifier: 'false', ...installEnv } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${cmd} ${args.join(' ')}: no end within ${timeoutMs} ms`));
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

describe.skipIf(!enabled)('npm pack → install the tarball → guidgate runs', () => {
  const tmp = useTempDir();

  it('installs globally with no build step, and works as a dependency (bin and guidgate/client)', { timeout: 10 * 60_000 }, async () => {
    expect(existsSync(join(REPO_ROOT, 'dist', 'src', 'client', 'index.d.ts')), 'run `npm run build` first (npm test does)').toBe(true);
    const dir = tmp();
    installEnv = { npm_config_better_sqlite3_local_prebuilds: await localPrebuild(dir) };
    // As the docs pack it; the build is fresh (npm test builds first), so without building again.
    const pack = await run(process.execPath, [join(REPO_ROOT, 'scripts', 'packTarball.mjs'), '--no-build', '--pack-destination', dir], REPO_ROOT, 120_000);
    expect(pack.status, pack.stderr).toBe(0);
    const tarball = pack.stdout.trim();
    const listing = await run('tar', ['-tzf', tarball], dir, 60_000);
    const files = listing.stdout.split('\n').filter(Boolean).map((f) => f.replace(/^package\//, ''));
    // The manifest shipped runs nothing at a user's install, and names no development tool.
    const unpacked = join(dir, 'unpacked');
    mkdirSync(unpacked);
    expect((await run('tar', ['-xzf', tarball, '-C', unpacked, 'package/package.json'], dir, 60_000)).status).toBe(0);
    const shipped = JSON.parse(readFileSync(join(unpacked, 'package', 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(shipped['scripts']).toBeUndefined();
    expect(shipped['devDependencies']).toBeUndefined();
    expect(shipped['version']).toBe(version);
    // Compiled JavaScript and the client's types are in; sources, tests and benchmarks are not.
    expect(files).toEqual(expect.arrayContaining(['bin/guidgate', 'dist/src/cli/main.js', 'dist/src/client/index.js', 'dist/src/client/index.d.ts', 'deploy/guidgate.service']));
    expect(files).toEqual(expect.arrayContaining(Object.keys(CONSOLE_ASSETS).map((name) => `dist/console/${name}`)));
    expect(files.filter((f) => f.startsWith('src/') || f.startsWith('test/') || f.startsWith('dist/test/') || f.startsWith('dist/bench/'))).toEqual([]);

    // An operator's global install. No `prepare` runs for a tarball: there is nothing to compile but SQLite.
    const prefix = join(dir, 'prefix');
    const started = Date.now();
    const install = await run('npm', ['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', '--allow-scripts=better-sqlite3', tarball], dir, 8 * 60_000);
    const installSeconds = (Date.now() - started) / 1000;
    expect(install.status, install.stderr).toBe(0);
    // As documented: better-sqlite3's install script allowed, nothing else asked for, no engine refused on this Node.
    expect(npmComplaints(install.stderr)).toEqual([]);
    expect(enginesRefusing(join(prefix, 'lib', 'node_modules', 'guidgate'))).toEqual([]);
    const guidgate = join(prefix, 'bin', 'guidgate');
    const v = await run(guidgate, ['--version'], dir, 30_000);
    expect(v.status, v.stderr).toBe(0);
    expect(v.stdout.trim()).toBe(version);
    const demoStarted = Date.now();
    const demo = await run(guidgate, ['demo', '--transfers', '20'], dir, 120_000);
    expect(demo.status, `${demo.stdout}\n${demo.stderr}`).toBe(0);
    expect(demo.stdout).toContain('every transfer ended applied exactly once');
    const demoSeconds = (Date.now() - demoStarted) / 1000;
    // The installed relay serves the console from the package's own files.
    const served = spawn(guidgate, ['serve', '--port', '0', '--db', join(dir, 'console.db')], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const base = await new Promise<string>((resolve, reject) => {
        let out = '';
        served.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /listening on (http:\/\/\S+)/.exec(out);
          if (m) resolve(m[1]!);
        });
        served.on('exit', (code) => reject(new Error(`serve exited ${code}: ${out}`)));
      });
      for (const name of Object.keys(CONSOLE_ASSETS)) {
        const res = await fetch(`${base}/console/${name === 'index.html' ? '' : name}`);
        expect(res.status, name).toBe(200);
        expect(await res.text(), name).toBe(readFileSync(join(REPO_ROOT, 'dist', 'console', name), 'utf8'));
      }
    } finally {
      if (served.exitCode === null) {
        const gone = new Promise((r) => served.once('exit', r));
        served.kill('SIGTERM');
        await gone;
      }
    }

    // A channel project that depends on guidgate: `npx guidgate` and `import 'guidgate/client'` with its types.
    const project = join(dir, 'channel');
    mkdirSync(project);
    // npm 11 takes a project's allowed install scripts from its package.json (--allow-scripts is for global installs).
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'channel', private: true, type: 'module', dependencies: { guidgate: `file:${tarball}` }, allowScripts: { 'better-sqlite3': true } }));
    const dep = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], project, 10 * 60_000);
    expect(dep.status, dep.stderr).toBe(0);
    // The repository's own overrides do not reach a dependent project: its tree must be right for this Node by itself.
    expect(npmComplaints(dep.stderr)).toEqual([]);
    expect(enginesRefusing(project)).toEqual([]);
    const npx = await run('npx', ['--no-install', 'guidgate', '--version'], project, 60_000);
    expect(npx.status, npx.stderr).toBe(0);
    expect(npx.stdout.trim()).toBe(version);
    writeFileSync(
      join(project, 'send.ts'),
      [
        "import { createClient, type TransferResult } from 'guidgate/client';",
        "const client = createClient({ baseUrl: 'http://127.0.0.1:1', timeout: 100, maxWait: 100 });",
        "const pending: Promise<TransferResult> = client.transfer({ from: 'A', to: 'B', amount: 1 });",
        'void pending.catch(() => undefined).finally(() => client.close());',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, skipLibCheck: true, types: ['node'], typeRoots: [join(REPO_ROOT, 'node_modules', '@types')] }, files: ['send.ts'] }),
    );
    const tsc = await run(process.execPath, [join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], project, 120_000);
    expect(tsc.status, `${tsc.stdout}${tsc.stderr}`).toBe(0);
    const imported = await run(process.execPath, ['--input-type=module', '-e', "const m = await import('guidgate/client'); console.log(typeof m.createClient, Object.keys(m.RESEND_RULES).length)"], project, 30_000);
    expect(imported.status, imported.stderr).toBe(0);
    expect(imported.stdout.trim()).toMatch(/^function \d+$/);
    expect(readdirSync(join(project, 'node_modules', 'guidgate'))).not.toContain('src');

    console.log(`pack: ${files.length} files; global install ${installSeconds.toFixed(0)} s (better-sqlite3 from the local prebuild); demo --transfers 20 ${demoSeconds.toFixed(1)} s`);
  });
});
