import { closeSync, existsSync, fchownSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { createdLineOf, formatCreatedLine, formatKeyLine, isKeyLine, isKeyName, newToken, parseKeysFile, SCOPES, tokenHash, type Scope } from './keysFile.js';

/** `guidgate keys add|list|remove` (CONTRACT.md §5, §6). Nothing here ever writes a token to the file. */

export interface KeysCommandError {
  /** 2: bad usage (a name or scope the file could not hold); 1: the file or the key is not as asked. */
  readonly exit: 1 | 2;
  readonly message: string;
}

export interface KeyListing {
  readonly name: string;
  readonly scopes: readonly Scope[];
  /** When `keys add` made it (ms since the epoch); null for a key made before guidgate recorded it, or by hand. */
  readonly created: number | null;
}

const failed = (message: string): E.Either<KeysCommandError, never> => E.left({ exit: 1, message });

interface KeysFileText {
  readonly text: string;
  readonly keys: readonly KeyListing[];
}

function readExisting(path: string): E.Either<KeysCommandError, KeysFileText | null> {
  if (!existsSync(path)) return E.right(null);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return failed(`cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const parsed = parseKeysFile(text);
  if (E.isLeft(parsed)) return failed(`${path} ${parsed.left.message}; fix the file first`);
  const created = new Map<string, number>();
  for (const line of text.split('\n')) {
    const c = createdLineOf(line);
    if (c !== null) created.set(c.name, c.at);
  }
  return E.right({ text, keys: parsed.right.map((k) => ({ name: k.name, scopes: SCOPES.filter((s) => k.scopes.has(s)), created: created.get(k.name) ?? null })) });
}

/**
 * Appends a new key and returns its token, which exists nowhere else (the caller shows it once), and whether this
 * made the file.
 */
export function addKey(path: string, name: string, scopes: readonly Scope[], now: number = Date.now()): E.Either<KeysCommandError, { token: string; created: boolean }> {
  if (!isKeyName(name)) return E.left({ exit: 2, message: `'${name}' is not a key name (^[A-Za-z0-9._-]{1,64}$, and not a token)` });
  if (scopes.length === 0) return E.left({ exit: 2, message: `give at least one scope (${SCOPES.join(', ')})` });
  const existing = readExisting(path);
  if (E.isLeft(existing)) return existing;
  if (existing.right?.keys.some((k) => k.name === name)) return failed(`a key named ${name} already exists in ${path}; remove it first to replace it`);

  const token = newToken();
  const prefix = existing.right !== null && existing.right.text !== '' && !existing.right.text.endsWith('\n') ? '\n' : '';
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    // The mode applies when the file is created: it holds hashes only, but who may call is still nobody's business.
    const fd = openSync(path, 'a', 0o600);
    try {
      // One write: a reader (serve on SIGHUP) sees the key with its created line or neither.
      writeSync(fd, `${prefix}${formatCreatedLine(name, now)}\n${formatKeyLine(name, scopes, tokenHash(token))}\n`);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    return failed(`cannot write ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return E.right({ token, created: existing.right === null });
}

function readRequired(path: string): E.Either<KeysCommandError, KeysFileText> {
  const existing = readExisting(path);
  if (E.isLeft(existing)) return existing;
  return existing.right === null ? failed(`no keys file at ${path}`) : E.right(existing.right);
}

/**
 * What to tell whoever made a new keys file as root: the file is root's and 0600, so a `serve` running as its own
 * user (deploy/guidgate.service) cannot read it until it is given to that user. Null when there is nothing to say.
 */
export function newFileOwnerNote(path: string, created: boolean): string | null {
  if (!created || process.getuid?.() !== 0) return null;
  return `created ${path} owned by root (mode 0600): give it to the user serve runs as, or serve cannot read it (chown guidgate:guidgate ${path})`;
}

export function listKeys(path: string): E.Either<KeysCommandError, readonly KeyListing[]> {
  return E.map((file: KeysFileText) => file.keys)(readRequired(path));
}

/**
 * Removes the key's line and the comment saying when it was made, and keeps every other line (other comments too) as
 * it was; the file is replaced whole, with the old file's owner.
 */
export function removeKey(path: string, name: string): E.Either<KeysCommandError, void> {
  const file = readRequired(path);
  if (E.isLeft(file)) return file;
  if (!file.right.keys.some((k) => k.name === name)) return failed(`no key named ${name} in ${path}`);
  const kept = file.right.text.split('\n').filter((line) => !(isKeyLine(line) && line.trim().split(/[ \t]+/)[0] === name) && createdLineOf(line)?.name !== name);
  const temp = `${path}.${process.pid}.tmp`;
  try {
    const owner = statSync(path);
    const fd = openSync(temp, 'wx', 0o600);
    try {
      writeSync(fd, kept.join('\n'));
      // The new file keeps the old one's owner (root editing the service user's file), as an append does.
      if (process.getuid?.() === 0 && (owner.uid !== 0 || owner.gid !== 0)) fchownSync(fd, owner.uid, owner.gid);
    } finally {
      closeSync(fd);
    }
    // A rename: a serve reading the file on SIGHUP sees the old file or the new one, never half of one.
    renameSync(temp, path);
  } catch (err) {
    return failed(`cannot rewrite ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return E.right(undefined);
}
