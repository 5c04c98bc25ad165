import type { Command } from 'commander';
import { orThrow } from '../events/storeResult.js';
import type { NotificationState } from '../events/notifications.js';
import { dbFlag, flag, intArg, jsonFlag } from './options.js';
import { err, out, printJson, setExit } from './output.js';
import { withLedger } from './withLedger.js';

/** `guidgate notifications` (CONTRACT.md §11): the outbox listed, and notifications queued again. */
export function registerNotifications(program: Command): void {
  const notifications = program
    .command('notifications')
    .description('list the notifications recorded for channels (serve --notify-url delivers them), oldest first')
    .addOption(flag('--pending', 'only those not yet delivered nor given up'))
    .addOption(flag('--given-up', 'only those given up (past serve --notify-for)'))
    .addOption(flag('--limit <n>', 'list at most this many').argParser(intArg(1)).default(1000))
    .addOption(dbFlag())
    .addOption(jsonFlag('print an array of {webhookId, guid, seq, type, state, attempts, recordedAt, nextAttemptAt, deliveredAt, lastResult}'))
    .action(async (o: { pending?: boolean; givenUp?: boolean; limit: number; db: string; json?: boolean }, cmd: Command) => {
      if (o.pending === true && o.givenUp === true) return cmd.error('guidgate: --pending and --given-up exclude each other', { exitCode: 2, code: 'guidgate.usage' });
      const state: NotificationState | undefined = o.pending === true ? 'pending' : o.givenUp === true ? 'given_up' : undefined;
      setExit(
        await withLedger('notifications', o.db, async (store) => {
          const { listNotifications } = await import('../commands/notifications.js');
          const rows = await orThrow(listNotifications(store, { ...(state === undefined ? {} : { state }), limit: o.limit }));
          if (o.json === true) {
            printJson(rows);
            return 0;
          }
          for (const n of rows) {
            const when = n.state === 'pending' ? `next ${n.nextAttemptAt ?? '-'}` : n.state === 'delivered' ? `delivered ${n.deliveredAt ?? '-'}` : 'given up';
            out(`${n.webhookId}\t${n.type}\t${n.state}\t${n.attempts} attempt${n.attempts === 1 ? '' : 's'}\trecorded ${n.recordedAt}\t${when}\t${n.lastResult ?? ''}`);
          }
          const counts = await orThrow(store.notificationCounts());
          out(`${counts.pending} pending, ${counts.delivered} delivered, ${counts.givenUp} given up`);
          return 0;
        }),
      );
    });
  notifications
    .command('redeliver')
    .description('queue the GUIDs\' notifications again (delivered or given up ones too), due now, with the same webhook-id')
    .argument('<guid...>', 'the transfer GUIDs')
    // --db is the parent's (commander gives it the flag wherever it stands on the line).
    .action(async (guids: string[]) => {
      const o = notifications.opts<{ db: string }>();
      setExit(
        await withLedger('notifications redeliver', o.db, async (store) => {
          const { redeliver } = await import('../commands/notifications.js');
          const { queued, unknown } = await orThrow(redeliver(store, guids));
          for (const guid of unknown) err(`guidgate notifications redeliver: no notification recorded for ${guid}`);
          out(`${queued} notification${queued === 1 ? '' : 's'} queued again (a serve with --notify-url delivers them)`);
          return unknown.length > 0 ? 1 : 0;
        }),
      );
    });
}
