import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as E from 'fp-ts/lib/Either.js';

/** The keys file (CONTRACT.md §6): one key per line, `NAME SCOPES HASH`. */

export const SCOPES = ['transfer', 'read', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

export const KEY_NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
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

/** `transfer,read` → the scopes, or the first word that is not one. */
export function parseScopes(text: string): E.Either<string, Scope[]> {
  const words = text.split(',');
  const scopes: Scope[] = [];
  for (const w of words) {
    if (!(SCOPES as readonly string[]).includes(w)) return E.left(w === '' ? 'an empty scope' : `unknown scope '${w}'`);
    if (!scopes.includes(w as Scope)) scopes.push(w as Scope);
  }
  return E.right(scopes);
}

/** Blank lines and lines starting with `#` hold no key. */
export function isKeyLine(line: string): boolean {
  const trimmed = line.trim();
  return trimmed !== '' && !trimmed.startsWith('#');
}

/**
 * Parses the whole file; the first bad line fails it. The message names the line and never quotes a hash
 * field in full (an operator may have pasted a token there by mistake).
 */
export function parseKeysFile(text: string): E.Either<KeysFileError, Key[]> {
  const keys: Key[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/\r$/, '');
    if (!isKeyLine(line)) continue;
    const fail = (message: string) => E.left({ line: i + 1, message: `line ${i + 1}: ${message}` });
    const fields = line.trim().split(/[ \t]+/);
    if (fields.length !== 3) return fail(`expected NAME SCOPES HASH, found ${fields.length} field(s)`);
    const [name, scopesText, hashText] = fields as [string, string, string];
    if (!KEY_NAME_PATTERN.test(name)) return fail('the name must match ^[A-Za-z0-9._-]{1,64}$');
    const scopes = parseScopes(scopesText);
    if (E.isLeft(scopes)) return fail(`${scopes.left} (scopes are ${SCOPES.join(', ')})`);
    if (!HASH_PATTERN.test(hashText)) return fail('the hash must be sha256: and 64 lowercase hex digits');
    if (keys.some((k) => k.name === name)) return fail(`the name ${name} is given twice`);
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
