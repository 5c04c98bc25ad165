/**
 * A multi-host `--db` (CONTRACT.md §9) that guidgate cannot use is bad usage, exit 2, for every command that takes
 * `--db`, from the flag or from GUIDGATE_DB, with a message naming the part at fault and never the password; nothing
 * is connected to (the hosts here do not exist).
 */
import { describe, expect, it } from 'vitest';
import { cli } from '../support/commandsSeed.js';

const ACCOUNT = ['--account-url', 'http://127.0.0.1:9'];
/** Every command with `--db`, with what else it needs to get as far as running. */
const COMMANDS: ReadonlyArray<readonly string[]> = [
  ['serve'],
  ['resolve', ...ACCOUNT],
  ['reprocess', ...ACCOUNT],
  ['purge'],
  ['history', 'g-1'],
  ['ledger'],
  ['stats'],
  ['rebuild'],
  ['check'],
];

describe('a PostgreSQL URL guidgate cannot use: exit 2 naming the part, for every command', () => {
  it('target_session_attrs other than read-write or primary, by flag and by GUIDGATE_DB', async () => {
    const bad = 'postgres://app:hunter2@db1.invalid:5432,db2.invalid:5432/ledger?target_session_attrs=prefer-standby';
    const runs = await Promise.all(
      COMMANDS.flatMap((command) => [cli([...command, '--db', bad], {}, { killAfterMs: 20_000 }), cli([...command], { GUIDGATE_DB: bad }, { killAfterMs: 20_000 })]),
    );
    for (const [i, r] of runs.entries()) {
      const what = `${COMMANDS[Math.floor(i / 2)]!.join(' ')} (${i % 2 === 0 ? '--db' : 'GUIDGATE_DB'})`;
      expect(r.code, `${what}: ${r.stderr}`).toBe(2);
      expect(r.stderr, what).toContain('target_session_attrs="prefer-standby" is not accepted');
      expect(r.stderr + r.stdout, what).not.toContain('hunter2');
    }
  });

  it('a host list that does not parse', async () => {
    const r = await cli(['stats', '--db', 'postgres://app@db1.invalid:5432,,db2.invalid/ledger']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('host 2 of the URL is empty');
  });
});
