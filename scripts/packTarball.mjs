// `npm run tarball [-- --pack-destination DIR] [-- --no-build]`: the package as its users install it. npm's own
// `files` rule picks what ships (compiled JavaScript, the console, deploy/); the manifest shipped is package.json
// without what only a checkout uses: no scripts (a user's install must run none of guidgate's: `prepare` builds a
// checkout, and npm lists it as an install script of a tarball, warning even with --allow-scripts=better-sqlite3),
// no devDependencies, no allowScripts (the root project's setting). Prints the tarball's path.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { 'pack-destination': { type: 'string', default: '.' }, 'no-build': { type: 'boolean', default: false } } });
const destination = resolve(values['pack-destination']);
const npm = (args, cwd) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });

if (!values['no-build']) execFileSync('npm', ['run', 'build'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
const [listed] = JSON.parse(npm(['pack', '--dry-run', '--json', '--ignore-scripts'], root));
const stage = mkdtempSync(join(tmpdir(), 'guidgate-pack-'));
try {
  for (const { path } of listed.files) {
    mkdirSync(dirname(join(stage, path)), { recursive: true });
    copyFileSync(join(root, path), join(stage, path));
    chmodSync(join(stage, path), statSync(join(root, path)).mode & 0o777);
  }
  const { scripts: _scripts, devDependencies: _dev, allowScripts: _allow, ...shipped } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  writeFileSync(join(stage, 'package.json'), `${JSON.stringify(shipped, null, 2)}\n`);
  mkdirSync(destination, { recursive: true });
  const [packed] = JSON.parse(npm(['pack', stage, '--json', '--ignore-scripts', '--pack-destination', destination], root));
  process.stdout.write(`${join(destination, packed.filename)}\n`);
} finally {
  rmSync(stage, { recursive: true, force: true });
}
