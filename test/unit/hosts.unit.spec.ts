import { describe, expect, it } from 'vitest';
import { tryNext } from '../../src/store/postgres/hosts.js';

describe("tryNext: whether a fresh session is what target_session_attrs=read-write asks for (CONTRACT.md §9)", () => {
  it.each([
    [{ inRecovery: false, readOnly: 'off' }, null],
    [{ inRecovery: true, readOnly: 'on' }, 'a standby (in recovery)'],
    // pg_auto_failover's promoted standby, read-only until the old primary is presumed gone.
    [{ inRecovery: false, readOnly: 'on' }, 'read-only (default_transaction_read_only)'],
  ])('%o → %s', (session, why) => {
    expect(tryNext(session)).toBe(why);
  });
});
