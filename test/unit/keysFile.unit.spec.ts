import * as E from 'fp-ts/lib/Either.js';
import fc from 'fast-check';
import { describe, it, expect } from 'vitest';
import { accessFor, bearerToken } from '../../src/relay/auth/authHook.js';
import { findKey, newToken, parseKeysFile, tokenHash } from '../../src/relay/auth/keysFile.js';
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
    [`bank-a transfer ${hash('a')} extra`, 'expected NAME SCOPES HASH'],
    ['bank-a transfer', 'expected NAME SCOPES HASH'],
    [`bank/a transfer ${hash('a')}`, 'the name must match'],
    [`${'n'.repeat(65)} transfer ${hash('a')}`, 'the name must match'],
    [`bank-a transfer,root ${hash('a')}`, "unknown scope 'root'"],
    [`bank-a Transfer ${hash('a')}`, "unknown scope 'Transfer'"],
    [`bank-a transfer, ${hash('a')}`, 'an empty scope'],
    ['bank-a transfer sha256:abc', 'the hash must be'],
    [`bank-a transfer ${hash('A')}`, 'the hash must be'],
    [`bank-a transfer md5:${'a'.repeat(64)}`, 'the hash must be'],
  ])('refuses %s, naming the line', (line, why) => {
    const parsed = parseKeysFile(`# first\n\n${line}\n`);
    expect(E.isLeft(parsed)).toBe(true);
    if (E.isLeft(parsed)) {
      expect(parsed.left.line).toBe(3);
      expect(parsed.left.message).toContain('line 3');
      expect(parsed.left.message).toContain(why);
    }
  });
  it('refuses a name given twice', () => {
    const parsed = parseKeysFile(`a read ${hash('a')}\na admin ${hash('b')}\n`);
    expect(E.isLeft(parsed) && parsed.left.message).toContain('line 2: the name a is given twice');
  });
  it('a refusal never quotes a hash field (it may be a token pasted by mistake)', () => {
    const token = newToken();
    const parsed = parseKeysFile(`a read ${token}\n`);
    expect(E.isLeft(parsed) && parsed.left.message).not.toContain(token);
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
