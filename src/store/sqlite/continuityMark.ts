import { createHash, randomUUID } from 'node:crypto';
import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { homedir } from 'node:os';
import { realpathSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import type Database from 'better-sqlite3';
import type { ContinuityMark, EventKey, LedgerStanding, MarkJudgment } from '../../events/store.js';
import { LEDGER_DIR_MODE, LEDGER_FILE_MODE } from './ledgerFile.js';

/**
 * The SQLite side of the continuity guard (CONTRACT.md §9): how far the log reaches, which events it lacks, and the
 * mark of the ledger's standing. The mark lives in a folder of its own (`--continuity-dir`), not beside the file: a
 * restore of the data directory (`cp -a`, `tar`, `rsync`, a snapshot) brings back whatever is beside the ledger, in
 * agreement with it. The mark names the event at its position, not only a count: after a restore, new writes (a
 * `purge` run first) push the count back up, but the event at the marked position is then missing or another.
 */

/** The folder of the marks: `--continuity-dir`, else `$XDG_STATE_HOME/guidgate`, else `~/.local/state/guidgate`. */
export function continuityDir(given: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (given !== undefined && given !== '') return resolve(given);
  const state = env['XDG_STATE_HOME'];
  // The XDG spec: a relative path there is invalid and ignored.
  if (state !== undefined && isAbsolute(state)) return join(state, 'guidgate');
  return join(homedir(), '.local', 'state', 'guidgate');
}

/**
 * Why the folder of the marks defeats them, or null: inside the ledger's own directory (the service user's home is
 * often the data directory, so the default lands there), a restore of that directory brings the mark back with it.
 */
export function continuityDirProblem(ledgerPath: string, given: string | undefined): string | null {
  const dir = continuityDir(given);
  const real = (p: string): string => {
    try {
      return realpathSync(p);
    } catch {
      return resolve(p);
    }
  };
  const ledgerDir = dirname(real(ledgerPath));
  const inside = relative(ledgerDir, real(dir));
  if (inside !== '' && (inside.startsWith('..') || isAbsolute(inside))) return null;
  return `the continuity marks (${dir}) are inside the ledger's directory ${ledgerDir}: a restore of that directory brings the mark back with the ledger, in agreement with it; set --continuity-dir (GUIDGATE_CONTINUITY_DIR) to a directory outside it`;
}

/** The mark file of the ledger whose real path (symbolic links resolved) is `ledgerRealPath`: one file per ledger. */
export const markFile = (dir: string, ledgerRealPath: string): string =>
  join(dir, `ledger-${createHash('sha256').update(ledgerRealPath).digest('hex').slice(0, 32)}.json`);

/** The event the mark names: the newest at or below its position (a lost append can leave a position unused). */
interface Witness extends EventKey {
  readonly position: number;
  readonly type: string;
  readonly at: number;
}

/** What the mark file holds. `ledger`: the real path it is for (a file copied from elsewhere names another). */
interface StoredMark {
  readonly version: 2;
  readonly ledger: string;
  readonly position: number;
  readonly event: Witness | null;
  readonly at: number;
  readonly window?: { readonly wentBackAt: number; readonly endsAt: number };
  readonly restored?: { readonly at: number };
  /** The mark's identity: random, made when the file is first written in its folder, kept by every rewrite. */
  readonly id?: string;
}

/**
 * Which mark vouches for the ledger: the mark's random `id` is written into the ledger (`continuity_vouch`, one row)
 * whenever a mark with another id is written for it. A mark whose id is not the one the ledger names (an older mark
 * left in another folder, a mark made afresh) does not judge this ledger: unknown standing, the window. A copy of
 * the ledger names the mark in use when it was taken, so it agrees only with that mark, which has moved on since.
 */
function vouchOf(db: Database.Database): { readonly markId: string; readonly folder: string } | null {
  try {
    const row = db.prepare('SELECT mark_id AS markId, folder FROM continuity_vouch WHERE one = 1').get() as { markId: string; folder: string } | undefined;
    return row ?? null;
  } catch {
    return null; // a ledger not yet migrated names no mark
  }
}

function vouchFor(db: Database.Database, markId: string, folder: string, at: number): void {
  if (vouchOf(db)?.markId === markId) return;
  db.prepare('INSERT INTO continuity_vouch (one, mark_id, folder, at) VALUES (1, ?, ?, ?) ON CONFLICT (one) DO UPDATE SET mark_id = excluded.mark_id, folder = excluded.folder, at = excluded.at')
    .run(markId, folder, at);
}

/** Where a ledger's marks are kept: its real path, and the folder. */
export interface MarkPlace {
  readonly ledger: string;
  readonly dir: string;
}

/**
 * Where the file stands: the highest position the log ever handed out (`sqlite_sequence`, which AUTOINCREMENT
 * keeps even when the last events are deleted), or `durable`, the writer's last synced one, when that is lower. A
 * file does not change server under its process (a replaced file is the file watch's: E503), so `server` and
 * `instance` name the file path only.
 */
export function fileStanding(db: Database.Database, path: string, durable: number | null): LedgerStanding {
  // Only what is on disk: the mark must never get ahead of what a power cut leaves (then it would say "went back").
  const position = durable === null ? logPosition(db) : Math.min(logPosition(db), durable);
  return { server: `sqlite:${path}`, instance: `sqlite:${path}`, position, canChange: false, seen: { file: path, position } };
}

const positionStatements = new WeakMap<Database.Database, Database.Statement>();

/**
 * The highest position the log has handed out, committed (on disk or not). The writer reads it at every sync: the
 * statement is prepared once per connection.
 */
export function logPosition(db: Database.Database): number {
  let statement = positionStatements.get(db);
  if (statement === undefined) {
    statement = db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'events'").pluck();
    positionStatements.set(db, statement);
  }
  return (statement.get() as number | undefined) ?? 0;
}

/** Of `keys`, the events the log does not have. */
export function missingFileEvents(db: Database.Database, keys: readonly EventKey[]): EventKey[] {
  const has = db.prepare('SELECT 1 FROM events WHERE guid = ? AND seq = ?').pluck();
  return keys.filter(({ guid, seq }) => has.get(guid, seq) === undefined);
}

function witnessAt(db: Database.Database, position: number): Witness | null {
  const row = db.prepare('SELECT position, guid, seq, type, at FROM events WHERE position <= ? ORDER BY position DESC LIMIT 1').get(position) as Witness | undefined;
  return row === undefined ? null : { position: row.position, guid: row.guid, seq: row.seq, type: row.type, at: row.at };
}

const shownEvent = (e: Witness): string => `${e.type} of ${e.guid} seq ${e.seq} at ${new Date(e.at).toISOString()}`;

/** Whether the log is behind `mark`, judged by its history: the count not below, and the event named exactly there. */
function behind(db: Database.Database, mark: StoredMark): string | null {
  const position = logPosition(db);
  if (position < mark.position) {
    return `the ledger is behind its continuity mark (the log reaches position ${position}, the mark ${mark.position}): restored from an older copy?`;
  }
  if (mark.event === null) return null;
  const there = db.prepare('SELECT position, guid, seq, type, at FROM events WHERE position = ?').get(mark.event.position) as Witness | undefined;
  const same = there !== undefined && there.guid === mark.event.guid && there.seq === mark.event.seq && there.type === mark.event.type && there.at === mark.event.at;
  if (same) return null;
  return `the ledger's history is not the one its continuity mark recorded: at position ${mark.event.position} the mark names ${shownEvent(mark.event)}, the log has ${there === undefined ? 'no event' : shownEvent(there)} (restored from an older copy, and written to since?)`;
}

async function readStored(file: string, ledger: string): Promise<StoredMark | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`${file} is not a continuity mark (not JSON)`);
  }
  if (!isStoredMark(parsed)) throw new Error(`${file} is not a continuity mark`);
  // Another ledger's (a hash shared by two paths, a folder copied from another host): not this ledger's mark.
  return parsed.ledger === ledger ? parsed : null;
}

const isWindow = (w: unknown): boolean => {
  const v = w as Record<string, unknown> | null;
  return typeof v === 'object' && v !== null && Number.isSafeInteger(v['wentBackAt']) && Number.isSafeInteger(v['endsAt']);
};

function isStoredMark(v: unknown): v is StoredMark {
  if (typeof v !== 'object' || v === null) return false;
  const m = v as Record<string, unknown>;
  if (m['version'] !== 2 || typeof m['ledger'] !== 'string' || !Number.isSafeInteger(m['position']) || !Number.isSafeInteger(m['at'])) return false;
  const e = m['event'] as Record<string, unknown> | null;
  if (e !== null && (typeof e !== 'object' || !Number.isSafeInteger(e['position']) || typeof e['guid'] !== 'string' || !Number.isSafeInteger(e['seq']) || typeof e['type'] !== 'string' || !Number.isSafeInteger(e['at']))) return false;
  if (m['window'] !== undefined && !isWindow(m['window'])) return false;
  if (m['id'] !== undefined && typeof m['id'] !== 'string') return false;
  const r = m['restored'] as Record<string, unknown> | undefined;
  return r === undefined || (typeof r === 'object' && r !== null && Number.isSafeInteger(r['at']));
}

/**
 * The ledger's mark, judged against the log (`judged`). None, for a log that never had an event: null (a new ledger).
 * None, for a log with history: its standing is unknown, judged `unknown` (never trusted silently). A mark file that
 * does not parse is said so (an Error): a folder someone edited is not a ledger to trust either.
 */
export async function readFileMark(db: Database.Database, place: MarkPlace): Promise<ContinuityMark | null> {
  const file = markFile(place.dir, place.ledger);
  const stored = await readStored(file, place.ledger);
  if (stored === null) {
    if (logPosition(db) === 0) return null;
    const why = `there is no continuity mark for this ledger in ${place.dir}, and the ledger has history: its standing is unknown (first start with this --continuity-dir, or after an upgrade; the ledger moved from another path or host; the folder was lost or is another user's)`;
    return { position: 0, at: 0, judged: { verdict: 'unknown', why } };
  }
  const vouch = vouchOf(db);
  if (vouch !== null && vouch.markId !== stored.id) {
    const why = `the ledger was last vouched for by another continuity mark (in ${vouch.folder}) than the one in ${place.dir}: an older mark left in this folder, or the ledger restored from a copy taken under another mark; its standing is unknown`;
    return { position: 0, at: 0, judged: { verdict: 'unknown', why } };
  }
  const mark: ContinuityMark = {
    position: stored.position, at: stored.at,
    ...(stored.window === undefined ? {} : { window: stored.window }),
    ...(stored.restored === undefined ? {} : { restored: stored.restored }),
  };
  const back = behind(db, stored);
  const judged: MarkJudgment | undefined =
    back !== null ? { verdict: 'behind', why: back }
    : stored.restored !== undefined ? { verdict: 'restored', why: `guidgate restore recorded at ${new Date(stored.restored.at).toISOString()} that the ledger was put back from a copy` }
    : undefined;
  return judged === undefined ? mark : { ...mark, judged };
}

let tmpCount = 0;

/**
 * Writes the mark durably: a temporary file synced, renamed over the last mark, the folder synced (a power cut
 * leaves the old mark or the new one, never half of one); the folder 0700, the file 0600, as the ledger's. The event
 * at the position is read from the log. A mark already there with a higher position that the log still has (another
 * process wrote it: serve and a purge side by side) is kept, so the mark never moves back over a ledger that did not.
 */
export async function writeFileMark(db: Database.Database, place: MarkPlace, mark: ContinuityMark): Promise<void> {
  const target = markFile(place.dir, place.ledger);
  let position = mark.position;
  let event = witnessAt(db, position);
  const existing = await readStored(target, place.ledger).catch(() => null);
  if (existing !== null && existing.position > position && behind(db, existing) === null) {
    position = existing.position;
    event = existing.event;
  }
  const id = existing?.id ?? randomUUID();
  const stored: StoredMark = {
    version: 2, ledger: place.ledger, id, position, event, at: mark.at,
    ...(mark.window === undefined ? {} : { window: mark.window }),
    ...(mark.restored === undefined ? {} : { restored: mark.restored }),
  };
  await mkdir(place.dir, { recursive: true, mode: LEDGER_DIR_MODE });
  const tmp = `${target}.${process.pid}.${++tmpCount}.tmp`;
  const file = await open(tmp, 'w', LEDGER_FILE_MODE);
  try {
    await file.writeFile(`${JSON.stringify(stored)}\n`, 'utf8');
    await file.sync();
  } finally {
    await file.close();
  }
  try {
    await rename(tmp, target);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  const dir = await open(place.dir, 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
  // After the file: a crash between the two leaves the ledger naming the old mark, so the next read finds them
  // disagreeing (unknown standing, the window), never a stale mark agreeing.
  vouchFor(db, id, place.dir, mark.at);
}
