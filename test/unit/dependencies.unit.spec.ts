import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/children.js';

const { satisfies } = createRequire(import.meta.url)('semver') as { satisfies(version: string, range: string): boolean };

interface LockedPackage {
  readonly version?: string;
  readonly dev?: boolean;
  readonly engines?: { readonly node?: string };
}

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockedPackage> };
const locked = Object.entries(lock.packages).filter(([path]) => path !== '');
/** The oldest Node package.json's engines allow (`>=20.18.1`). */
const floor = /^>=\s*(\d+\.\d+\.\d+)$/.exec(pkg.engines.node)?.[1];

/** `path@version needs range` for every locked package whose engines.node does not allow `node`. */
const refusing = (node: string, packages: typeof locked): string[] =>
  packages
    .filter(([, p]) => p.engines?.node !== undefined && !satisfies(node, p.engines.node))
    .map(([path, p]) => `${path}@${p.version ?? '?'} needs node ${p.engines!.node}`);

describe('the locked dependency tree runs on the Node versions guidgate supports', () => {
  it('npm ci on this Node warns of no engine (EBADENGINE): every locked package allows it', () => {
    expect(refusing(process.versions.node, locked)).toEqual([]);
  });

  it(`every runtime dependency allows the oldest Node package.json allows (${pkg.engines.node})`, () => {
    expect(floor, 'package.json engines.node is ">=x.y.z"').toBeDefined();
    expect(refusing(floor!, locked.filter(([, p]) => p.dev !== true))).toEqual([]);
  });
});
