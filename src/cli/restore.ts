import type { Command } from 'commander';
import * as E from 'fp-ts/lib/Either.js';
import { orThrow } from '../events/storeResult.js';
import { continuityDirFlag, dbFlag, flag, jsonFlag } from './options.js';
import { err, out, printJson, setExit, type Exit } from './output.js';
import { withLedger } from './withLedger.js';

export interface RestoreCliOptions { db: string; continuityDir?: string; trust?: boolean; json?: boolean }

/**
 * `guidgate restore`: what an operator runs after putting a SQLite ledger back from a copy on purpose (CONTRACT.md §9).
 * It records that the ledger went back and takes its standing as the new continuity mark: the commands that write
 * run on it again, and the next `serve` opens the continuity window (every GUID the ledger does not know inquired
 * about before its first send). `--trust`: the ledger is current (moved after a clean stop, the first start after an
 * upgrade): its standing is recorded and no window opens. `--trust` is refused (exit 1, nothing written) on a
 * ledger the mark judges gone back (behind it, another history, or a restore already recorded): only a ledger judged
 * current, or of unknown standing (no mark), can be trusted.
 */
export function runRestore(o: RestoreCliOptions): Promise<Exit> {
  if (/^postgres(ql)?:\/\//i.test(o.db)) {
    err('guidgate restore: a PostgreSQL ledger keeps no continuity mark in a folder; serve judges the database itself (docs/deploying.md, "When the ledger goes back")');
    return Promise.resolve(1);
  }
  return withLedger('restore', o.db, async (store) => {
    const before = await store.readMark();
    const standing = await orThrow(store.ledgerStanding());
    const now = await orThrow(store.now());
    const trusted = o.trust === true;
    const judgedBack = E.isRight(before) ? before.right?.judged : undefined;
    // --trust is for a ledger judged current or of unknown standing (no mark): over one the mark shows went back it
    // would record the copy as current, and the transfers it forgot would be sent again with no inquiry first.
    const windowEnds = E.isRight(before) ? before.right?.window?.endsAt : undefined;
    const openWindow = windowEnds !== undefined && windowEnds > now;
    if (trusted && (judgedBack?.verdict === 'behind' || judgedBack?.verdict === 'restored' || openWindow)) {
      const why = judgedBack?.why ?? `serve saw it go back and its continuity window is open until ${new Date(windowEnds!).toISOString()}`;
      err(`guidgate restore --trust: refused, nothing written: the ledger at ${o.db} is judged gone back (${why}).`);
      err('  Trusting it would record it as current with no continuity window: the transfers it forgot (applied by the account system after the copy was taken) would be sent again without an inquiry, and applied twice.');
      err(`  Run \`guidgate restore --db ${o.db}\` without --trust: the next serve opens the continuity window and inquires before every first send. If this is not the ledger you meant to put back, put the current one back instead.`);
      return 1;
    }
    await orThrow(store.writeMark({ position: standing.position, at: now, ...(trusted ? {} : { restored: { at: now } }) }));
    const judged = E.isRight(before) ? (before.right?.judged ?? null) : null;
    const was = E.isLeft(before) ? `the mark could not be read (${before.left.message})` : judged === null ? (before.right === null ? 'there was no mark' : 'the mark agreed with it') : judged.why;
    if (o.json) printJson({ db: o.db, position: standing.position, trusted, before: was, windowOnNextServe: !trusted });
    else if (trusted) out(`restore --trust: the ledger at ${o.db} (position ${standing.position}) is recorded as current; no continuity window (before: ${was})`);
    else {
      out(`restore: recorded that the ledger at ${o.db} went back (position ${standing.position}; before: ${was})`);
      out('the next serve opens the continuity window (--continuity-window): every GUID the ledger does not know is inquired about before its first send; the commands that write run on this ledger again');
    }
    return 0;
  }, { continuityDir: o.continuityDir });
}

export function registerRestore(program: Command): void {
  program
    .command('restore')
    .description('after putting a SQLite ledger back from a copy: record that it went back (the next serve opens the continuity window) and take its standing as the continuity mark')
    .addOption(flag('--trust', 'the ledger is current (moved after a clean stop, first start after an upgrade): record its standing, open no window'))
    .addOption(dbFlag())
    .addOption(continuityDirFlag())
    .addOption(jsonFlag())
    .action(async (o: RestoreCliOptions) => {
      setExit(await runRestore(o));
    });
}
