import { dbUrlWithoutPassword } from '../../shared/dbUrl.js';
import { formatDuration } from '../../shared/duration.js';

/** Where `serve` keeps its ledger and calls its account system: what a maintenance command on the same ledger must name. */
export interface CommandLineSettings {
  /** `--db` as serve was given it (a path or a PostgreSQL URL). */
  readonly db: string;
  /** The account system's base URL serve calls (the bundled simulator's when none was given). */
  readonly accountUrl: string;
}

/** Quoted for a POSIX shell when it holds anything but characters a shell leaves alone. */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * A URL without its password (the user name stays): a command pasted from a page must carry no secret, and libpq
 * (PGPASSWORD, ~/.pgpass) or the account system's own setup supplies it. Also a PostgreSQL `password=` parameter.
 * A path is returned as it is.
 */
export function withoutPassword(urlOrPath: string): string {
  return dbUrlWithoutPassword(urlOrPath) ?? urlOrPath;
}

/**
 * The command that sends dead letters again with one attempt more than serve's cap, less the GUIDs: it names the
 * ledger, the account system and the settings that must agree with serve's (every process on a ledger uses the
 * same --grace; the call timeout and --min-age as serve's), so that pasted as it is it runs against what serve runs.
 */
export function reprocessCommand(settings: CommandLineSettings, opts: { readonly maxAttempts: number; readonly timeoutMs: number; readonly graceMs: number; readonly minAgeMs: number }): string {
  return [
    'guidgate reprocess',
    `--db ${shellWord(withoutPassword(settings.db))}`,
    `--account-url ${shellWord(withoutPassword(settings.accountUrl))}`,
    `--timeout ${formatDuration(opts.timeoutMs)}`,
    `--grace ${formatDuration(opts.graceMs)}`,
    `--min-age ${formatDuration(opts.minAgeMs)}`,
    `--max-attempts ${opts.maxAttempts + 1}`,
  ].join(' ');
}
