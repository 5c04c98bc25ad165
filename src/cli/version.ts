import { packageRoot } from '../shared/packageRoot.js';

/** guidgate's version, read from its package.json when asked, so it is never stale. */
export function packageVersion(): string {
  return packageRoot()?.version ?? 'unknown (package.json not found)';
}
