import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * guidgate's version, read from its package.json when asked: the nearest one above this module that is
 * guidgate's, so it is the same from `src` (tests) and from `dist/src` (the built command) and never stale.
 */
export function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown; version?: unknown };
      if (pkg.name === 'guidgate' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      /* no package.json here, or not readable: look further up */
    }
    const parent = dirname(dir);
    if (parent === dir) return 'unknown (package.json not found)';
    dir = parent;
  }
}
