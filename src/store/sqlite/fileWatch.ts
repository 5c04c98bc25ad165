import { LedgerUnavailableError } from '../../events/errors.js';
import { fileIdentity, type FileIdentity } from './ledgerFile.js';

export interface FileWatch {
  /**
   * Null while the file at the path is still the one opened; otherwise why not. Once it has changed it
   * stays changed: putting a file back does not make writes to whatever happened in between safe.
   */
  check(): string | null;
  stop(): void;
}

/**
 * Notices when the file at `path` is no longer the one this process opened (deleted, replaced, moved): a
 * process keeps writing to the file it has open, so without this a deleted ledger keeps answering 0000 and
 * the next start on an empty or older file applies the same GUIDs again. Checked on demand and every
 * `intervalMs` by an unref'd timer; `onChange` is called once, with the reason.
 */
export function watchFileIdentity(path: string, opened: FileIdentity, intervalMs: number, onChange: (reason: string) => void): FileWatch {
  let lost: string | null = null;
  const check = (): string | null => {
    if (lost !== null) return lost;
    let now: FileIdentity | null;
    try {
      now = fileIdentity(path);
    } catch (err) {
      now = null;
      lost = `ledger file ${path} was deleted or replaced: it can no longer be found (${err instanceof Error ? err.message : String(err)}); restart on the right file`;
    }
    if (lost === null && now === null) lost = `ledger file ${path} was deleted or replaced: there is no file at its path any more; restart on the right file`;
    if (lost === null && now !== null && (now.dev !== opened.dev || now.ino !== opened.ino)) {
      lost = `ledger file ${path} was deleted or replaced: another file is at its path now; restart on the right file`;
    }
    if (lost !== null) {
      clearInterval(timer);
      onChange(lost);
    }
    return lost;
  };
  const timer = setInterval(check, intervalMs);
  timer.unref();
  return { check, stop: () => clearInterval(timer) };
}

/** Watches the file at `path` as it is now, just opened (`serve`'s `watchFile` option). */
export function watchOpenedFile(path: string, o: { readonly intervalMs?: number; readonly onLost?: (reason: string) => void }): FileWatch {
  const opened = fileIdentity(path);
  if (opened === null) throw new LedgerUnavailableError(`ledger file ${path} vanished while it was being opened`);
  return watchFileIdentity(path, opened, o.intervalMs ?? 1000, o.onLost ?? (() => {}));
}
