import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useCleanup } from './cleanup.js';

/**
 * `tmp()` makes a fresh folder under the OS temp dir, removed after the test (`'test'`, the default) or after
 * the file (`'file'`, for a folder the whole file shares).
 */
export function useTempDir(scope: 'test' | 'file' = 'test'): () => string {
  const cleanup = useCleanup(scope);
  return () => {
    const d = mkdtempSync(join(tmpdir(), 'guidgate-'));
    cleanup.add(() => rmSync(d, { recursive: true, force: true }));
    return d;
  };
}
