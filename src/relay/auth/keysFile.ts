import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as E from 'fp-ts/lib/Either.js';

/** The keys file (CONTRACT.md §6): one key per line, `NAME SCOPES HASH`. */

export const SCOPES = ['transfer', 'read', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

const KEY_NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
const HASH_PATTERN = /^sha256:[0-9a-f]{64}$/;

export interface Key {
  readonly name: string;
  readonly scopes: ReadonlySet<Scope>;
  /** SHA-256 of the token (32 bytes); the token itself is never kept. */
  readonly hash: Buffer;
}

export interface KeysFileError {
  /** 1-based; absent when the file as a whole could not be read. */
  readonly line?: number;
  readonly message: string;
}

/** Why a SCOPES text is refused: the position (1-based) of the first word that is not a scope, and that word. */
export interface BadScope {
  readonly position: number;
  readonly of: number;
  /** Not for a message about the keys file: an operator may have pasted a token into the column. */
  readonly word: string;
}

/** `transfer,read` → the scopes, or the first word that is not one. */
export function parseScopes(text: string): E.Either<BadScope, Scope[]> {
  const words = text.split(',');
  const scopes: Scope[] = [];
  for (const [i, w] of words.entries()) {
    if (!(SCOPES as readonly string[]).includes(w)) return E.left({ position: i + 1, of: words.length, word: w });
    if (!scopes.includes(w as Scope)) scopes.push(w as Scope);
  }
  return E.right(scopes);
}

/** A token as `newToken` makes it: refused as a NAME, which is logged with every request the key makes. */
const TOKEN_SHAPE = /^gg_[A-Za-z0-9_-]{43}$/;

/** A key's NAME (CONTRACT.md §6), and not a token pasted in its place. */
export const isKeyName = (name: string): boolean => KEY_NAME_PATTERN.test(name) && !TOKEN_SHAPE.test(name);

/** Blank lines and lines starting with `#` hold no key. */
export function isKeyLine(line: string): boolean {
  const trimmed = line.trim();
  return trimmed !== '' && !trimmed.startsWith('#');
}

const COLUMNS = ['NAME', 'SCOPES', 'HASH'] as const;

/**
 * Parses the whole file; the first bad line fails it. The message names the line and the column and says what
 * is allowed, and never quotes a value from the file: an operator may have pasted a token into any column, and
 * the message goes to the terminal, serve's log (SIGHUP) and whatever collects them.
 */
export function parseKeysFile(text: string): E.Either<KeysFileError, Key[]> {
  const keys: Key[] = [];
  const lineOf = new Map<string, number>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/\r$/, '');
    if (!isKeyLine(line)) continue;
    const fail = (message: string) => E.left({ line: i + 1, message: `line ${i + 1}: ${message}` });
    const failIn = (column: number, message: string) => fail(`column ${column + 1} (${COLUMNS[column]!}): ${message}`);
    const fields = line.trim().split(/[ \t]+/);
    if (fields.length !== 3) return fail(`expected NAME SCOPES HASH, found ${fields.length} field(s)`);
    const [name, scopesText, hashText] = fields as [string, string, string];
    if (!isKeyName(name)) return failIn(0, TOKEN_SHAPE.test(name) ? 'a token, not a name (a name is logged with every request)' : 'the name must match ^[A-Za-z0-9._-]{1,64}$');
    const scopes = parseScopes(scopesText);
    if (E.isLeft(scopes)) {
      const { position, of, word } = scopes.left;
      return failIn(1, `${word === '' ? 'an empty scope' : 'an unknown scope'} (scope ${position} of ${of}): expected ${SCOPES.join(', ')}, separated by commas`);
    }
    if (!HASH_PATTERN.test(hashText)) return failIn(2, 'the hash must be sha256: and 64 lowercase hex digits');
    const first = lineOf.get(name);
    if (first !== undefined) return failIn(0, `the same name as line ${first} (names are unique)`);
    lineOf.set(name, i + 1);
    keys.push({ name, scopes: new Set(scopes.right), hash: Buffer.from(hashText.slice('sha256:'.length), 'hex') });
  }
  return E.right(keys);
}

export function readKeysFile(path: string): E.Either<KeysFileError, Key[]> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    return E.left({ message: `cannot read the keys file ${path} (${code})` });
  }
  const parsed = parseKeysFile(text);
  return E.isLeft(parsed) ? E.left({ ...parsed.left, message: `${path} ${parsed.left.message}` }) : parsed;
}

function sha256(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** The HASH field of a key line. */
export function tokenHash(token: string): string {
  return `sha256:${sha256(token).toString('hex')}`;
}

export function formatKeyLine(name: string, scopes: readonly Scope[], hash: string): string {
  return `${name} ${scopes.join(',')} ${hash}`;
}

/**
 * When a key was made, kept beside its line as a comment (`# NAME created 2026-12-05T09:30:00.000Z`): the line format
 * of CONTRACT.md §6 has no room for it, a fourth field would make every strict reader (an older guidgate among them)
 * refuse the file, and every reader skips comments.
 */
export function formatCreatedLine(name: string, at: number): string {
  return `# ${name} created ${new Date(at).toISOString()}`;
}

const CREATED_LINE = /^#\s*([A-Za-z0-9._-]{1,64}) created (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\s*$/;

/** The key a `formatCreatedLine` comment is about and when it was made; null for any other line. */
export function createdLineOf(line: string): { readonly name: string; readonly at: number } | null {
  const m = CREATED_LINE.exec(line.replace(/\r$/, '').trim());
  if (m === null) return null;
  const at = Date.parse(m[2]!);
  return Number.isNaN(at) ? null : { name: m[1]!, at };
}

/** 32 random bytes; the prefix makes a leaked token easy to recognise (secret scanners, logs). */
export function newToken(): string {
  return `gg_${randomBytes(32).toString('base64url')}`;
}

/**
 * The key whose hash matches the presented token, or null. The token is hashed first and the fixed-length
 * hashes compared with `timingSafeEqual`, every key every time, so the time taken tells nothing about how much
 * of a token was right or which key came close.
 */
export function findKey(keys: readonly Key[], token: string): Key | null {
  const presented = sha256(token);
  let found: Key | null = null;
  for (const key of keys) {
    if (timingSafeEqual(presented, key.hash) && found === null) found = key;
  }
  return found;
}
