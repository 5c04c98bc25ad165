import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { LedgerUnavailableError } from '../../events/errors.js';

/**
 * A module as a worker thread can load it: the file itself when running compiled; under a TypeScript test runner
 * (a .ts source) its compiled twin in dist.
 */
export function compiledModule(url: string, what: string): string {
  const file = fileURLToPath(url).replace(/\.ts$/, '.js');
  if (url.endsWith('.js') && existsSync(file)) return file;
  const dist = file.replace(/^(.*[\\/])src([\\/])/, '$1dist$2src$2');
  if (!existsSync(dist)) throw new LedgerUnavailableError(`${what} ${dist} is missing: run npm run build`);
  return dist;
}

/** The compiled script `name` beside the module at `moduleUrl` (its `import.meta.url`), for a worker thread. */
export const siblingScript = (moduleUrl: string, name: string, what: string): string => compiledModule(new URL(name, moduleUrl.replace(/\.ts$/, '.js')).href, what);
