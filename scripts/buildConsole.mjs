// The console's build step (`npm run build`, and the tests' globalSetup when it is stale): compile src/console/*.ts
// for the browser (tsconfig.console.json: DOM, ES modules, no Node types) into dist/console/console/, with the
// modules of src/shared they import (money, plurals: the rules the command line uses, compiled a second time, never
// copied) into dist/console/shared/, so that the browser resolves their imports as written; then copy the folder's
// other files (HTML, CSS, icon) to dist/console/. dist/console/ is what the package ships and `serve` serves.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'src', 'console');
const out = join(root, 'dist', 'console');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
// Nothing of an earlier build stays behind to be shipped (`files` takes the whole folder).
rmSync(out, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.console.json')], { cwd: root, stdio: 'inherit' });
mkdirSync(out, { recursive: true });
for (const name of readdirSync(src)) if (!name.endsWith('.ts')) copyFileSync(join(src, name), join(out, name));
