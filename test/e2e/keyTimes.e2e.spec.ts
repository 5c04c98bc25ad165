import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { parseKeysFile, tokenHash } from '../../src/relay/auth/keysFile.js';
import { runToEnd } from '../support/children.js';
import { httpRequest } from '../support/relayHarness.js';
import { BIN, closed, startServe } from '../support/serveProcess.js';
import { useTempDir } from '../support/tmp.js';

const guidgate = async (...args: string[]) => runToEnd(spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] }));
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/**
 * When a key was made and when it was last used, as `guidgate keys list` shows them: made, kept beside its line in
 * the keys file (a comment: the line format of CONTRACT.md §6 is unchanged, and a strict reader still reads the
 * file); last used, noted by serve in memory and written to the ledger at most once a minute and at shutdown.
 */
describe('keys: created and last used', () => {
  const tmp = useTempDir('file');

  it('keys add records when; serve notes each use; keys list --db shows both; a file without the times still works', async () => {
    const dir = tmp();
    const keys = join(dir, 'keys');
    const db = join(dir, 'ledger.db');
    // A key made before guidgate recorded the time: a line alone, as the contract gives it.
    writeFileSync(keys, `# made by hand\nold read ${tokenHash('gg_an-old-token-that-is-long-enough-to-be-one')}\n`, { mode: 0o600 });
    const before = Date.now();
    const added: string[] = [];
    for (const [name, scopes] of [['ops', 'read,admin'], ['pay', 'transfer']] as const) {
      const r = await guidgate('keys', 'add', name, '--scopes', scopes, '--keys', keys);
      expect(r.code, r.stderr).toBe(0);
      added.push(r.stdout.trim());
    }
    const after = Date.now();
    const [opsToken] = added;
    const text = readFileSync(keys, 'utf8');
    // Every line is a key line of the contract's format or a comment: the strict reader reads the same keys.
    expect(text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).every((l) => l.split(' ').length === 3)).toBe(true);
    const parsed = parseKeysFile(text);
    expect(E.isRight(parsed) && parsed.right.map((k) => k.name).sort()).toEqual(['old', 'ops', 'pay']);
    expect(text).toMatch(/^# ops created \S+\nops read,admin sha256:[0-9a-f]{64}$/m);

    const listed = await guidgate('keys', 'list', '--keys', keys);
    expect(listed.code, listed.stderr).toBe(0);
    const rows = Object.fromEntries(listed.stdout.trim().split('\n').map((l) => l.split('\t')).map(([name, ...rest]) => [name, rest]));
    expect(rows['old']).toEqual(['read', '-', '-']);
    expect(rows['ops']![0]).toBe('read,admin');
    expect(rows['ops']![1]).toMatch(ISO);
    const created = Date.parse(rows['ops']![1]!);
    expect(created).toBeGreaterThanOrEqual(before);
    expect(created).toBeLessThanOrEqual(after);
    expect(rows['ops']![2]).toBe('-');

    const relay = startServe(['--db', db, '--keys', keys, '--settle-every', '0']);
    const url = await relay.ready;
    const usedFrom = Date.now();
    for (let i = 0; i < 5; i++) expect((await httpRequest(`${url}/v1/stats`, { method: 'GET', headers: { authorization: `Bearer ${opsToken!}` } })).status).toBe(200);
    const usedTo = Date.now();
    // Written at shutdown (and once a minute while it runs).
    relay.child.kill('SIGTERM');
    expect(await closed(relay.child)).toBe(0);

    const withUses = await guidgate('keys', 'list', '--keys', keys, '--db', db);
    expect(withUses.code, withUses.stderr).toBe(0);
    const lines = Object.fromEntries(withUses.stdout.trim().split('\n').map((l) => l.split('\t')).map(([name, ...rest]) => [name, rest]));
    const lastUsed = Date.parse(lines['ops']![2]!);
    expect(lastUsed).toBeGreaterThanOrEqual(usedFrom);
    expect(lastUsed).toBeLessThanOrEqual(usedTo);
    expect(lines['pay']![2]).toBe('never');
    expect(lines['old']).toEqual(['read', '-', 'never']);
    // No hash, no token is ever listed.
    expect(withUses.stdout).not.toMatch(/sha256|gg_/);

    // remove takes the key's line and the comment saying when it was made; the others stay.
    expect((await guidgate('keys', 'remove', 'ops', '--keys', keys)).code).toBe(0);
    const left = readFileSync(keys, 'utf8');
    expect(left).not.toMatch(/\bops\b/);
    expect(left).toContain('# made by hand');
    expect(left).toMatch(/^# pay created /m);
  }, 60_000);
});
