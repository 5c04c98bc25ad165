import type { Command } from 'commander';
import { orThrow } from '../events/storeResult.js';
import { dbFlag, jsonFlag, maxAttemptsFlag } from './options.js';
import { age, iso, out, printJson, setExit, type Exit } from './output.js';
import { withLedger } from './withLedger.js';

export function runStats(o: { db: string; maxAttempts: number; json?: boolean }): Promise<Exit> {
  return withLedger('stats', o.db, async (store) => {
    const { ledgerStats } = await import('../commands/stats.js');
    const now = await orThrow(store.now());
    const s = await orThrow(ledgerStats(store, { maxAttempts: o.maxAttempts, clock: () => now }));
    if (o.json) {
      printJson(s);
      return 0;
    }
    for (const [status, count] of Object.entries(s.rows)) out(`${status.padEnd(9)} ${count}`);
    out(`${'total'.padEnd(9)} ${s.total}`);
    for (const status of ['UNKNOWN', 'FAILED'] as const) {
      const oldest = s.oldest[status];
      out(`oldest ${status}: ${oldest === null ? '-' : `${age(oldest.ageMs)} (last change ${iso(oldest.updatedAt)})`}`);
    }
    out(`FAILED at the attempt cap (${s.deadLetters.maxAttempts}), needing a person: ${s.deadLetters.count}`);
    const holes = s.blackHoles;
    if (holes.count > 0) {
      const named = `${holes.guids.join(', ')}${holes.count > holes.guids.length ? `, …${holes.count - holes.guids.length} more` : ''}`;
      out(`  of which sent every time into silence (each send unanswered, every inquiry absent): ${holes.count}${holes.more ? '+' : ''}: ${named}`);
    }
    return 0;
  });
}

export function registerStats(program: Command): void {
  program
    .command('stats')
    .description('rows per status, the oldest UNKNOWN and FAILED rows, and FAILED rows at the attempt cap')
    .addOption(maxAttemptsFlag('the attempt cap the relay and reprocess use'))
    .addOption(dbFlag())
    .addOption(jsonFlag())
    .action(async (o: { maxAttempts: number; db: string; json?: boolean }) => {
      setExit(await runStats(o));
    });
}
