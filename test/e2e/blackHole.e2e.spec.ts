/**
 * A black hole seen from the outside (#28): an account system that takes every request and never answers. The row
 * is sent, times out, is found absent, is sent again … until the cap; the row's timeline and `/v1/stats` say so in
 * words ("sent 3 times, every inquiry absent") and name it among the dead letters. The real `serve`, a real ledger
 * file, the simulator holding every request, over loopback sockets.
 */
import { describe, expect, it } from 'vitest';
import { startHarness, transfer, type Harness } from '../support/relayHarness.js';
import { noConnectionLeft } from '../support/tcpStates.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';
import { cli } from '../support/commandsSeed.js';

describe('a black hole: every send unanswered, every inquiry absent', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  it('the timeline says "sent 3 times, every inquiry absent"; /v1/stats names the dead letter; a dead letter of refusals is not one', async () => {
    const h: Harness = cleanup.use(await startHarness(tmp(), {
      sim: { faults: { byGuidPrefix: { 'hole-': 'hold' } } },
      // No background settling: the operator API's resolve is the inquiry, one per send.
      relay: { timeoutMs: 300, minAgeMs: 1, settleEveryMs: 0, maxAttempts: 3, breakerFailures: 0 },
    }));
    const post = async (path: string, body: unknown = {}) =>
      (await fetch(`${h.relay.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json() as Promise<Record<string, unknown>>;
    const get = async (path: string) => (await h.get(path)).json();

    const hole = JSON.stringify(transfer({ guid: `hole-${process.pid}` }));
    const guid = String(JSON.parse(hole).guid);
    for (let send = 1; send <= 3; send++) {
      expect((await h.post(hole)).json()['code']).toBe('E901');
      // Once is no pattern; from the second send on it is one, the last send not yet asked about.
      const pattern = (await get(`/v1/transfers/${guid}/events`))['blackHole'];
      if (send === 1) expect(pattern).toBeNull();
      else expect(pattern).toEqual({ sent: send, absent: send - 1, summary: `sent ${send} times, every inquiry absent` });
      expect(await post(`/v1/transfers/${guid}/resolve`)).toMatchObject({ outcome: 'absent', after: { status: 'FAILED', attempts: send } });
    }
    expect(h.sim.guidStats(guid)).toMatchObject({ calls: 3, applied: 0 });
    expect((await get(`/v1/transfers/${guid}/events`))['blackHole']).toEqual({ sent: 3, absent: 3, summary: 'sent 3 times, every inquiry absent' });

    // A dead letter of refused connections is a dead letter, not a black hole.
    const refusing = h.sim.refuseConnections(60_000);
    await noConnectionLeft(process.pid, h.sim.port); // the relay runs in this process
    const refused = JSON.stringify(transfer());
    try {
      for (let i = 0; i < 3; i++) expect((await h.post(refused)).json()['code']).toBe('E902');
    } finally {
      void h.sim.refuseConnections(0);
      await refusing;
    }
    const stats = await get('/v1/stats');
    expect(stats['deadLetters']).toMatchObject({ maxAttempts: 3, count: 2 });
    expect(stats['blackHoles']).toEqual({ count: 1, guids: [guid], more: false });
    expect((await get(`/v1/transfers/${String(JSON.parse(refused).guid)}/events`))['blackHole']).toBeNull();

    // /metrics names it for the alert (GuidgateBlackHoleDeadLetter), one series per GUID; the refused one is not there.
    const metrics = (await h.get('/metrics')).body;
    expect(metrics.split('\n').filter((l) => l.startsWith('guidgate_dead_letter_black_hole{'))).toEqual([`guidgate_dead_letter_black_hole{guid="${guid}"} 1`]);

    // `guidgate history` and `guidgate stats` on the same ledger say the same, by the same rule.
    const history = await cli(['history', guid, '--db', h.db]);
    expect(history.stdout).toContain(`${guid}: sent 3 times, every inquiry absent (an account system that accepts connections and never answers: docs/operating.md)\n`);
    expect((await cli(['history', String(JSON.parse(refused).guid), '--db', h.db])).stdout).not.toContain('every inquiry absent');
    const human = await cli(['stats', '--max-attempts', '3', '--db', h.db]);
    expect(human.stdout).toContain('FAILED at the attempt cap (3), needing a person: 2\n');
    expect(human.stdout).toContain(`of which sent every time into silence (each send unanswered, every inquiry absent): 1: ${guid}\n`);
    expect(JSON.parse((await cli(['stats', '--max-attempts', '3', '--json', '--db', h.db])).stdout)['blackHoles']).toEqual({ count: 1, guids: [guid], more: false });
  }, 30_000);
});
