/** `guidgate demo` as a user runs it: a real process, real sockets, its printed table and its exit code. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it, expect } from 'vitest';
import { REPO_ROOT } from '../support/children.js';
import { cli } from '../support/commandsSeed.js';

const rowOf = (out: string, label: string): [number, number] => {
  const m = new RegExp(`^${label}\\s+(\\d+)\\s+(\\d+)$`, 'm').exec(out);
  if (m === null) throw new Error(`no '${label}' row in:\n${out}`);
  return [Number(m[1]), Number(m[2])];
};

describe('guidgate demo', () => {
  it('the same resending load double-debits through the naive relay and never through guidgate, which then settles every transfer exactly once', async () => {
    const r = await cli(['demo', '--transfers', '60', '--concurrency', '12']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const [naiveDoubles, ggDoubles] = rowOf(r.stdout, 'double debits');
    // Money as people read it (CONTRACT.md §5): major units and the currency, never fen labelled as yuan.
    const money = /^money moved in error\s+(\d+\.\d{2}) CNY\s+(\d+\.\d{2}) CNY$/m.exec(r.stdout);
    expect(money, r.stdout).not.toBeNull();
    const [naiveMoney, ggMoney] = [Number(money![1]), Number(money![2])];
    const [, ggCalls] = rowOf(r.stdout, 'account system calls');
    expect(naiveDoubles).toBeGreaterThan(0);
    expect(naiveMoney).toBeGreaterThan(0);
    expect(ggDoubles).toBe(0);
    expect(ggMoney).toBe(0);
    expect(ggCalls).toBeLessThanOrEqual(60);
    expect(r.stdout).toMatch(/settled ledger: DONE×60; account calls \d+, applied 60 \(of 60 transfers\), double debits 0/);
    // It ends with a reconciliation of both sides: the naive relay's doubles are its duplicate_in_journal breaks.
    const naiveDup = /^ {2}naive relay: .*duplicate_in_journal (\d+)/m.exec(r.stdout)?.[1];
    expect(Number(naiveDup)).toBe(naiveDoubles);
    expect(r.stdout).toMatch(/^ {2}guidgate: {4}no break: duplicate_in_journal 0, missing_in_ledger 0, matched 60$/m);
    // What the naive relay's doubles posted, in the same money as the table's row.
    const posted = /^ {2}naive relay: .*duplicate_in_journal \d+ \((\d+\.\d{2}) CNY posted by those transfers\)/m.exec(r.stdout)?.[1];
    expect(posted, r.stdout).toMatch(/^\d+\.\d{2}$/);
  }, 60_000);

  it('its --help and the README say the same duration', async () => {
    const r = await cli(['demo', '--help']);
    expect(r.code).toBe(0);
    const help = /lesson in (about \d+ seconds)/.exec(r.stdout)?.[1];
    const readme = /`\.\/bin\/guidgate demo[^`]*` shows the seed's lesson in (about \d+ seconds)/.exec(readFileSync(join(REPO_ROOT, 'README.md'), 'utf8'))?.[1];
    expect(help).toBeDefined();
    expect(help).toBe(readme);
  });

  it('bad usage exits 2 and names the flag', async () => {
    const r = await cli(['demo', '--transfers', 'lots']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--transfers/);
  });
});
