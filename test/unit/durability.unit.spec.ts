import { describe, expect, it } from 'vitest';
import type { DurabilityReport } from '../../src/events/store.js';
import { failoverRisk, waitsForStandby } from '../../src/wiring/durability.js';

const report = (over: Partial<DurabilityReport> = {}): DurabilityReport => ({ synchronousCommit: 'on', synchronousStandbyNames: 'ANY 1 (node2)', synchronousStandbys: 1, standbys: 1, hosts: 2, ...over });

describe('the durability report: when a failover could lose acknowledged claims (CONTRACT.md §9)', () => {
  it('a synchronous standby that commits wait for: no risk', () => {
    for (const synchronousCommit of ['on', 'remote_apply', 'remote_write']) {
      expect(waitsForStandby(report({ synchronousCommit }))).toBe(true);
      expect(failoverRisk(report({ synchronousCommit }))).toBeNull();
    }
  });

  it('says why when commits do not wait for a standby, where a failover is to be expected', () => {
    expect(failoverRisk(report({ synchronousStandbyNames: '', synchronousStandbys: 0 }))).toMatch(/synchronous_standby_names is empty/);
    expect(failoverRisk(report({ synchronousCommit: 'local' }))).toMatch(/synchronous_commit is local/);
    expect(failoverRisk(report({ synchronousCommit: 'off' }))).toMatch(/synchronous_commit is off/);
    expect(failoverRisk(report({ synchronousStandbys: 0 }))).toMatch(/no standby is synchronous now/);
    expect(failoverRisk(report({ synchronousStandbys: null, standbys: null }))).toMatch(/no synchronous standby is visible to this user/);
    // One host but a standby streaming from it: a failover is to be expected all the same.
    expect(failoverRisk(report({ hosts: 1, synchronousStandbyNames: '', synchronousStandbys: 0 }))).toMatch(/could lose acknowledged claims/);
  });

  it('one server without standbys has nothing to fail over to: no warning', () => {
    expect(failoverRisk(report({ hosts: 1, synchronousStandbyNames: '', synchronousStandbys: 0, standbys: 0 }))).toBeNull();
  });
});
