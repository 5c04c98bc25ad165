import { describe, expect, it } from 'vitest';
import { reprocessCommand, shellWord, withoutPassword } from '../../src/relay/operator/reprocessCommand.js';
import { counted } from '../../src/shared/plural.js';

describe('the command the console gives for a dead letter', () => {
  it('names serve\'s ledger, account system and the settings that must agree with serve\'s, one attempt above the cap', () => {
    expect(reprocessCommand({ db: '/var/lib/guidgate/ledger.db', accountUrl: 'https://core.bank.internal' }, { maxAttempts: 5, timeoutMs: 3000, graceMs: 5000, minAgeMs: 60_000 })).toBe(
      'guidgate reprocess --db /var/lib/guidgate/ledger.db --account-url https://core.bank.internal --timeout 3s --grace 5s --min-age 1m --max-attempts 6',
    );
  });

  it.each([
    ['postgres://guidgate:s3cret@db1:5432,db2:5432/ledger?target_session_attrs=read-write', 'postgres://guidgate@db1:5432,db2:5432/ledger?target_session_attrs=read-write'],
    ['postgresql://guidgate@db1/ledger?password=s3cret&sslmode=require', 'postgresql://guidgate@db1/ledger?sslmode=require'],
    ['postgres://guidgate@db1/ledger?sslmode=require&password=s3cret', 'postgres://guidgate@db1/ledger?sslmode=require'],
    ['postgres://db1/ledger?password=s3cret', 'postgres://db1/ledger'],
    ['https://relay:s3cret@core.bank.internal/api', 'https://relay@core.bank.internal/api'],
    ['/var/lib/guidgate/ledger.db', '/var/lib/guidgate/ledger.db'],
  ])('carries no password: %s → %s', (given, shown) => {
    expect(withoutPassword(given)).toBe(shown);
    expect(reprocessCommand({ db: given, accountUrl: given }, { maxAttempts: 1, timeoutMs: 1, graceMs: 1, minAgeMs: 0 })).not.toContain('s3cret');
  });

  it('quotes for a shell only what a shell would change', () => {
    expect(shellWord('/var/lib/guidgate/ledger.db')).toBe('/var/lib/guidgate/ledger.db');
    expect(shellWord('/srv/my ledger.db')).toBe("'/srv/my ledger.db'");
    expect(shellWord("/srv/it's.db")).toBe("'/srv/it'\\''s.db'");
    expect(shellWord('postgres://u@h/db?sslmode=require&x=1')).toBe("'postgres://u@h/db?sslmode=require&x=1'");
  });
});

describe('counts, one rule (the console\'s)', () => {
  it.each([
    [0, 'row', undefined, '0 rows'],
    [1, 'row', undefined, '1 row'],
    [2, 'failed call', undefined, '2 failed calls'],
    [1, 'entry', 'entries', '1 entry'],
    [3, 'entry', 'entries', '3 entries'],
  ] as const)('%s %s', (n, one, many, shown) => {
    expect(counted(n, one, many)).toBe(shown);
  });
});
