import type { Command } from 'commander';
import type { Actor } from '../events/codecs.js';
import type { NotificationOutbox } from '../events/store.js';
import { orThrow } from '../events/storeResult.js';
import type { ReconciliationMention, TimelineEntry } from '../commands/history.js';
import { indentJson } from '../json/indentJson.js';
import { termsOfRequest } from '../reconcile/ledgerFacts.js';
import { formatMoney } from '../shared/money.js';
import { dbFlag, flag, jsonFlag } from './options.js';
import { err, iso, out, printJson, setExit, type Exit } from './output.js';
import { withLedger } from './withLedger.js';

/** Fields that hold the raw bytes sent or received: shown as indented JSON, not as escaped JSON inside JSON. */
const RAW_JSON_FIELDS = new Set(['request', 'response']);
const DATA_INDENT = ' '.repeat(7);

/** Who wrote an event, on one line: `serve pid 41 on host-1, key shop-a, timeoutMs=3000 …`. */
function actorLine(actor: Actor | null): string {
  if (actor === null) return '(writer not recorded)';
  const params = Object.entries(actor.params ?? {}).map(([k, v]) => `${k}=${String(v)}`);
  return [`${actor.by} pid ${actor.pid} on ${actor.host}`, ...(actor.key === undefined ? [] : [`key ${actor.key}`]), ...params].join(', ');
}

/** An event's data, one field per line; the request and the answer pretty-printed as the bytes stored. */
function dataLines(data: unknown): string[] {
  if (typeof data !== 'object' || data === null) return [JSON.stringify(data)];
  return Object.entries(data).flatMap(([key, value]) => {
    const pretty = RAW_JSON_FIELDS.has(key) && typeof value === 'string' ? indentJson(value) : null;
    const lines = (pretty ?? JSON.stringify(value)).split('\n');
    return [`${key}: ${lines[0]!}`, ...lines.slice(1)];
  });
}

function printEntry(e: TimelineEntry, guid: string): void {
  if (e.kind === 'request') {
    const key = e.key === null ? '' : `, key ${e.key}`;
    const replayed = e.replayed ? ' (replayed: the stored answer, nothing sent)' : '';
    out(`     ${iso(e.at)}  ${'request'.padEnd(13)}  answered ${e.code}${replayed}${key}${e.fingerprintMatch ? '' : ', fingerprint differs (another request under this GUID)'}`);
    return;
  }
  out(`${String(e.seq).padStart(3)}  ${iso(e.at)}  ${e.type.padEnd(13)}  by ${actorLine(e.actor)}`);
  const note = staleAnswerNote(e);
  if (note !== null) out(`${DATA_INDENT}${note}`);
  for (const line of dataLines(e.data)) out(`${DATA_INDENT}${line}`);
  const money = moneyLine(e, guid);
  if (money !== null) out(`${DATA_INDENT}${money}`);
}

/** The claimed request's amount as people read money (CONTRACT.md §5), beside the minor units its bytes hold. */
function moneyLine(e: Extract<TimelineEntry, { kind: 'event' }>, guid: string): string | null {
  const request = e.type === 'Claimed' && typeof e.data === 'object' && e.data !== null ? (e.data as { request?: unknown }).request : undefined;
  if (typeof request !== 'string') return null;
  try {
    const { amount, currency } = termsOfRequest(guid, request);
    return `money: ${formatMoney(amount, currency)} (amount ${amount} in minor units)`;
  } catch {
    return null; // a request that does not read as the relay accepted it: its bytes above say what it is
  }
}

/** A reconciliation run that flagged the GUID: when, over which window, what it found, since which run. */
function printMention(m: ReconciliationMention): void {
  const since = m.firstSeen === m.run ? 'first seen in this run' : `open since run ${m.firstSeen}`;
  out(`     ${iso(m.at)}  ${'reconciled'.padEnd(13)}  run ${m.run} over [${iso(m.window.from)}, ${iso(m.window.to)}): ${m.category} ${m.severity}, ${since}`);
}

/** What a StaleAnswer means, in words, above its data: an auditor must not read past it. */
function staleAnswerNote(e: Extract<TimelineEntry, { kind: 'event' }>): string | null {
  if (e.type !== 'StaleAnswer' || typeof e.data !== 'object' || e.data === null) return null;
  const { attempt, currentAttempt } = e.data as { attempt?: unknown; currentAttempt?: unknown };
  if (typeof attempt !== 'number' || typeof currentAttempt !== 'number') return null;
  return attempt < currentAttempt
    ? `!! attempt ${attempt} was answered after attempt ${currentAttempt} was sent: the account system may have applied this transfer twice (not the row's outcome)`
    : `(attempt ${attempt} answered after the row was settled another way; not the row's outcome)`;
}

export function runHistory(o: { db: string; guid: string; json?: boolean; requests?: boolean }): Promise<Exit> {
  return withLedger('history', o.db, async (store) => {
    const { readHistory, readTimeline, readReconciliationMentions } = await import('../commands/history.js');
    if (o.json === true && o.requests !== true) {
      // CONTRACT.md §5: an array of {seq, type, at, data}.
      const events = await orThrow(readHistory(store, o.guid));
      if (events.length === 0) return noSuchGuid(o.guid);
      printJson(events);
      return 0;
    }
    const all = await orThrow(readTimeline(store, o.guid));
    const entries = o.requests === true ? all : all.filter((e) => e.kind === 'event');
    const events = all.filter((e) => e.kind === 'event').length;
    if (o.json === true) {
      if (events === 0) return noSuchGuid(o.guid);
      printJson(entries);
      return 0;
    }
    // A GUID the ledger never relayed may still have been flagged (missing_in_ledger): what an auditor looks it up for.
    const mentions = await orThrow(readReconciliationMentions(store, o.guid));
    if (events === 0 && mentions.length === 0) return noSuchGuid(o.guid);
    for (const e of entries) printEntry(e, o.guid);
    for (const m of mentions) printMention(m);
    await printNotifications(store, o.guid);
    const flagged = mentions.length === 0 ? '' : `; flagged by ${mentions.length} reconciliation run${mentions.length === 1 ? '' : 's'}`;
    if (events === 0) {
      out(`${o.guid}: no events in the ledger (guidgate never relayed it)${flagged}`);
      return 0;
    }
    const row = await orThrow(store.getLedger(o.guid));
    const requests = o.requests === true ? `, ${all.length - events} channel requests` : '';
    out(`${o.guid}: ${events} events${requests}; now ${row?.status ?? '(no ledger row)'}${row?.code == null ? '' : ` ${row.code}`}${flagged}`);
    // The black-hole pattern said in words, by the rule the operator API's timeline uses.
    const { unansweredSends } = await import('../commands/stats.js');
    const pattern = unansweredSends(all.flatMap((e) => (e.kind === 'event' ? [e] : [])));
    if (pattern !== null) out(`${o.guid}: ${pattern.summary} (an account system that accepts connections and never answers: docs/operating.md)`);
    return 0;
  });
}

/** The GUID's notifications (CONTRACT.md §11): each delivery attempt, then where each notification stands. */
async function printNotifications(store: NotificationOutbox, guid: string): Promise<void> {
  const [notifications, attempts] = await Promise.all([orThrow(store.listNotifications({ guid, limit: 100 })), orThrow(store.notificationAttempts(guid))]);
  const typeOf = new Map(notifications.map((n) => [n.seq, n.type]));
  for (const a of attempts) {
    const status = a.httpStatus === null ? '' : `HTTP ${a.httpStatus}, `;
    out(`     ${iso(a.at)}  ${'notification'.padEnd(13)}  ${typeOf.get(a.seq) ?? 'notification'} webhook-id ${guid}:${a.seq}: ${a.result} (${status}${a.detail}, ${Math.round(a.latencyMs)} ms)`);
  }
  for (const n of notifications) {
    const tried = `${n.attempts} attempt${n.attempts === 1 ? '' : 's'}`;
    const state = n.state === 'pending' ? `pending, next attempt ${iso(n.nextAt)}` : n.state === 'delivered' ? `delivered ${n.deliveredAt === null ? '' : iso(n.deliveredAt)}`.trim() : 'given up';
    out(`     ${iso(n.at)}  ${'notification'.padEnd(13)}  ${n.type} webhook-id ${guid}:${n.seq} recorded: ${state} (${tried})`);
  }
}

function noSuchGuid(guid: string): Exit {
  err(`guidgate history: no such GUID in the ledger: ${guid}`);
  return 1;
}

export function registerHistory(program: Command): void {
  program
    .command('history')
    .description("a GUID's events in order, with who wrote each, and the reconciliation runs that flagged it, for auditors")
    .argument('<guid>', 'the transfer GUID')
    .addOption(flag('--requests', "interleave the channel's requests for the GUID (time, key, code answered, fingerprint match)"))
    .addOption(dbFlag())
    .addOption(jsonFlag('print an array of {seq, type, at, data}; with --requests, the timeline: {kind: "event", seq, type, at, data, actor} and {kind: "request", at, key, code, fingerprintMatch, replayed}'))
    .action(async (guid: string, o: { db: string; json?: boolean; requests?: boolean }) => {
      setExit(await runHistory({ ...o, guid }));
    });
}
