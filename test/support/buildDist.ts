/**
 * vitest globalSetup: the writer-thread store and the child scripts run compiled code from `dist`, so a run of
 * `npx vitest run` alone must not test a stale build. Compiles `tsconfig.build.json` (incrementally) whenever
 * one of its inputs is newer than the last build; a run with nothing edited pays only for the mtime scan.
 * Likewise the console (`dist/console`, which `serve` serves): rebuilt when its sources are newer.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync, utimesSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { REPO_ROOT } from './children.js';

const BUILD_CONFIG = join(REPO_ROOT, 'tsconfig.build.json');
const BUILD_INFO = join(REPO_ROOT, 'dist', 'tsconfig.build.tsbuildinfo');
/** The console's build (`scripts/buildConsole.mjs`): its page, compiled last, marks when it ran. */
const CONSOLE_INPUTS = [join(REPO_ROOT, 'src', 'console'), join(REPO_ROOT, 'src', 'shared'), join(REPO_ROOT, 'tsconfig.console.json'), join(REPO_ROOT, 'scripts', 'buildConsole.mjs')];
const CONSOLE_BUILT = join(REPO_ROOT, 'dist', 'console', 'index.html');

function newestMtime(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs; // a deleted file shows only as a newer directory
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

/** True when `dist` is missing or older than a source file the build reads. */
export function distIsStale(): boolean {
  if (!existsSync(BUILD_INFO)) return true;
  const { include } = JSON.parse(readFileSync(BUILD_CONFIG, 'utf8')) as { include: string[] };
  const inputs = [...include.map((p) => join(REPO_ROOT, p)), BUILD_CONFIG, join(REPO_ROOT, 'tsconfig.json')];
  const built = statSync(BUILD_INFO).mtimeMs;
  return inputs.some((p) => existsSync(p) && newestMtime(p) > built);
}

/** True when the built console is missing or older than its sources. */
export function consoleIsStale(): boolean {
  if (!existsSync(CONSOLE_BUILT)) return true;
  const built = statSync(CONSOLE_BUILT).mtimeMs;
  return CONSOLE_INPUTS.some((p) => existsSync(p) && newestMtime(p) > built);
}

export default function setup(): void {
  if (consoleIsStale()) {
    execFileSync(process.execPath, [join(REPO_ROOT, 'scripts', 'buildConsole.mjs')], { cwd: REPO_ROOT, stdio: 'inherit' });
  }
  if (!distIsStale()) return;
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', BUILD_CONFIG], { cwd: REPO_ROOT, stdio: 'inherit' });
  // tsc leaves the build info alone when no output changed (a file saved unchanged); mark this check done.
  const now = new Date();
  utimesSync(BUILD_INFO, now, now);
}
