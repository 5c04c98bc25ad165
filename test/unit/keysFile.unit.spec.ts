import * as E from 'fp-ts/lib/Either.js';
import fc from 'fast-check';
import { describe, it, expect } from 'vitest';
import { accessFor, bearerToken } from '../../src/relay/auth/authHook.js';
import { findKey, isKeyName, newToken, parseKeysFile, tokenHash } from '../../src/relay/auth/keysFile.js';
import { isLoopbackHost } from '../../src/cli/serveSecurity.js';

const hash = (c: string) => `sha256:${c.repeat(64)}`;

describe('the keys file (CONTRACT.md §6)', () => {
  it('reads NAME SCOPES HASH lines, skipping blank and # lines', () => {
    const parsed = parseKeysFile(`# channel keys\n\n  \nbank-a transfer,read ${hash('a')}\r\nops.1 admin\t${hash('b')}\n`);
    expect(E.isRight(parsed)).toBe(true);
    if (E.isRight(parsed)) {
      expect(parsed.right.map((k) => [k.name, [...k.scopes]])).toEqual([['bank-a', ['transfer', 'read']], ['ops.1', ['admin']]]);
    }
  });
  it.each([
    [`bank-a transfer ${hash('a')} extra`, 'line 3: expected NAME SCOPES HASH, found 4 field(s)'],
    ['bank-a transfer', 'line 3: expected NAME SCOPES HASH, found 2 field(s)'],
    [`bank/a transfer ${hash('a')}`, 'line 3: column 1 (NAME): the name must match ^[A-Za-z0-9._-]{1,64}$'],
    [`${'n'.repeat(65)} transfer ${hash('a')}`, 'line 3: column 1 (NAME): the name must match'],
    [`bank-a transfer,root ${hash('a')}`, 'line 3: column 2 (SCOPES): an unknown scope (scope 2 of 2): expected transfer, read, admin, separated by commas'],
    [`bank-a Transfer ${hash('a')}`, 'line 3: column 2 (SCOPES): an unknown scope (scope 1 of 1): expected transfer, read, admin'],
    [`bank-a transfer, ${hash('a')}`, 'line 3: column 2 (SCOPES): an empty scope (scope 2 of 2)'],
    ['bank-a transfer sha256:abc', 'line 3: column 3 (HASH): the hash must be sha256: and 64 lowercase hex digits'],
    [`bank-a transfer ${hash('A')}`, 'line 3: column 3 (HASH): the hash must be'],
    [`bank-a transfer md5:${'a'.repeat(64)}`, 'line 3: column 3 (HASH): the hash must be'],
  ])('refuses %s, naming the line and the column', (line, why) => {
    const parsed = parseKeysFile(`# first\n\n${line}\n`);
    expect(E.isLeft(parsed)).toBe(true);
    if (E.isLeft(parsed)) {
      expect(parsed.left.line).toBe(3);
      expect(parsed.left.message).toContain(why);
    }
    // Nothing of the file is quoted: not the scope that is wrong, not the name.
    if (E.isLeft(parsed)) for (const word of ['root', 'Transfer', 'bank']) expect(parsed.left.message).not.toContain(word);
  });
  it('refuses a name given twice, naming both lines and not the name', () => {
    const parsed = parseKeysFile(`shop-a read ${hash('a')}\n# x\nshop-a admin ${hash('b')}\n`);
    expect(E.isLeft(parsed) && parsed.left.message).toBe('line 3: column 1 (NAME): the same name as line 1 (names are unique)');
  });
  it('refuses a token in the NAME column (it would be logged with every request), and keys add refuses it too', () => {
    const parsed = parseKeysFile(`${newToken()} read ${hash('a')}\n`);
    expect(E.isLeft(parsed) && parsed.left.message).toBe('line 1: column 1 (NAME): a token, not a name (a name is logged with every request)');
    expect(isKeyName(newToken())).toBe(false);
    expect(isKeyName('gg_short')).toBe(true);
  });
  it.each([
    ['NAME, with a space (four fields)', (t: string) => `shop a${t} read ${hash('a')}`],
    ['NAME', (t: string) => `${t} read ${hash('a')}`],
    ['SCOPES, alone', (t: string) => `shop-a ${t} ${hash('a')}`],
    ['SCOPES, after a good scope', (t: string) => `shop-a read,${t} ${hash('a')}`],
    ['HASH', (t: string) => `shop-a read ${t}`],
    ['HASH, after sha256:', (t: string) => `shop-a read sha256:${t}`],
    ['a fourth column', (t: string) => `shop-a read ${hash('a')} ${t}`],
  ])('a real token pasted into %s: refused, naming the line, never quoting any of it', (_where, lineWith) => {
    const token = newToken();
    const parsed = parseKeysFile(`ok read ${hash('f')}\n${lineWith(token)}\n`);
    expect(E.isLeft(parsed)).toBe(true);
    if (E.isRight(parsed)) return;
    expect(parsed.left.message).toMatch(/^line 2: /);
    for (let at = 0; at + 8 <= token.length; at++) expect(parsed.left.message).not.toContain(token.slice(at, at + 8));
  });
  it('property: whatever is in the file, a refusal quotes none of it beyond what the rules themselves say', () => {
    const secret = fc.stringMatching(/^[A-Za-z0-9_-]{12,60}$/);
    const column = fc.constantFrom(0, 1, 2, 3);
    fc.assert(
      fc.property(secret, column, (word, at) => {
        const fields = ['shop-a', 'read', hash('a')];
        fields.splice(at, at === 3 ? 0 : 1, `x${word}!`); // the ! makes the word wrong wherever it is
        const parsed = parseKeysFile(`${fields.join(' ')}\n`);
        expect(E.isLeft(parsed)).toBe(true);
        if (E.isLeft(parsed)) expect(parsed.left.message).not.toContain(word);
      }),
      { numRuns: 500 },
    );
  });
});

describe('tokens', () => {
  it('are gg_ and 32 random bytes, base64url, each new', () => {
    const a = newToken();
    expect(a).toMatch(/^gg_[A-Za-z0-9_-]{43}$/);
    expect(newToken()).not.toBe(a);
  });
  it('are found by their hash only; any other string finds nothing', () => {
    const tokens = [newToken(), newToken()];
    const keys = parseKeysFile(`a transfer ${tokenHash(tokens[0]!)}\nb read ${tokenHash(tokens[1]!)}\n`);
    if (E.isLeft(keys)) throw new Error(keys.left.message);
    expect(findKey(keys.right, tokens[0]!)?.name).toBe('a');
    expect(findKey(keys.right, tokens[1]!)?.name).toBe('b');
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (s) => {
        fc.pre(!tokens.includes(s));
        expect(findKey(keys.right, s)).toBeNull();
      }),
      { interruptAfterTimeLimit: 2000, numRuns: 2000 },
    );
    expect(findKey(keys.right, tokens[0]!.slice(0, -1))).toBeNull();
    expect(findKey(keys.right, tokenHash(tokens[0]!))).toBeNull();
  });
  it('Authorization: Bearer TOKEN, the scheme in any case; anything else is no token', () => {
    expect(bearerToken('Bearer gg_x')).toBe('gg_x');
    expect(bearerToken('bearer  gg_x')).toBe('gg_x');
    expect(bearerToken(undefined)).toBeNull();
    expect(bearerToken('Basic dXNlcjpwYXNz')).toBeNull();
    expect(bearerToken('Bearer')).toBeNull();
    expect(bearerToken('Bearer a b')).toBeNull();
    expect(bearerToken('gg_x')).toBeNull();
  });
});

describe('the route → scope table', () => {
  it.each([
    ['GET', '/healthz', 'public'],
    ['GET', '/openapi.json', 'public'],
    ['GET', '/console', 'public'],
    ['GET', '/console/*', 'public'],
    ['HEAD', '/healthz', 'public'],
    ['POST', '/v1/transfers', 'transfer'],
    ['GET', '/v1/transfers/:guid', 'read-or-own'],
    ['GET', '/metrics', 'read'],
    ['HEAD', '/metrics', 'read'],
    ['POST', '/v1/transfers/:guid/resolve', 'admin'],
    ['POST', '/v1/transfers/:guid/reprocess', 'admin'],
    ['GET', '/console/api/rows', 'admin'],
    ['POST', '/healthz', 'admin'],
  ])('%s %s needs %s', (method, route, expected) => {
    const a = accessFor(method, route);
    expect(a.kind === 'scope' ? a.scope : a.kind).toBe(expected);
  });
  it('a request no route matched needs a key, any key', () => expect(accessFor('GET', undefined).kind).toBe('any-key'));
});

describe('open mode is for loopback only', () => {
  it.each(['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', 'LOCALHOST', '::ffff:127.0.0.1', '0:0:0:0:0:0:0:1'])('%s is loopback', (h) => expect(isLoopbackHost(h)).toBe(true));
  it.each(['0.0.0.0', '::', '10.0.0.1', '128.0.0.1', 'example.com', 'localhost.example.com', '::ffff:10.0.0.1', '1.127.0.0'])('%s is not', (h) => expect(isLoopbackHost(h)).toBe(false));
});
