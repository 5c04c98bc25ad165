import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface PackageRoot {
  readonly dir: string;
  readonly version: string;
}

/**
 * guidgate's own package: the nearest package.json above this module whose name is guidgate, so that it is the
 * same from `src` (tests) and from `dist/src` (the built command, an installed package). Null if none is found.
 */
export function packageRoot(): PackageRoot | null {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'guidgate' && typeof pkg.version === 'string') return { dir, version: pkg.version };
    } catch {
      /* no package.json here, or not readable: look further up */
    }
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

/** guidgate's version, read from its package.json when asked, so it is never stale. */
export function packageVersion(): string {
  return packageRoot()?.version ?? 'unknown (package.json not found)';
}
