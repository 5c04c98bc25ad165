import * as t from 'io-ts';

/** Ledger states, as the contract names them (capitals, stored in `ledger.status`). */
export const Status = t.keyof({
  RECEIVED: null,
  SENT: null,
  DONE: null,
  UNKNOWN: null,
  FAILED: null,
  PURGED: null,
});
export type Status = t.TypeOf<typeof Status>;
export const STATUSES: readonly Status[] = Object.keys(Status.keys) as Status[];

/** `UNKNOWN`, `failed`, `UNKNOWN,FAILED` (any case, comma-separated) → the statuses; null when one is not a status or none is given. */
export function parseStatuses(text: string): Status[] | null {
  const parts = text.split(',').map((p) => p.trim().toUpperCase()).filter((p) => p !== '');
  if (parts.length === 0 || parts.some((p) => !(STATUSES as readonly string[]).includes(p))) return null;
  return parts as Status[];
}

const NonNegativeInt = t.refinement(t.number, (n) => Number.isSafeInteger(n) && n >= 0, 'NonNegativeInt');
const PositiveInt = t.refinement(t.number, (n) => Number.isSafeInteger(n) && n >= 1, 'PositiveInt');
/** A definite answer's code: 0000, B2xx (B then three digits starting with 2) or E500. The one place this rule lives. */
export function isDefiniteCode(code: string): boolean {
  return /^(0000|B2\d\d|E500)$/.test(code);
}
export const DefiniteCode = t.refinement(t.string, isDefiniteCode, 'DefiniteCode');

const withDetail = <P extends t.Props>(props: P) => t.intersection([t.type(props), t.partial({ detail: t.string })]);

/**
 * `request` and `response` are the raw bytes (as UTF-8 text) the relay sent and received; purge sets them to
 * null in the log itself so that only the tombstone survives.
 */
/**
 * The trace context of the claim's request (CONTRACT.md §10): the W3C headers of guidgate's span for it, so that the
 * calls made later for the same transfer (the settler, `resolve`, `reprocess`) continue its trace.
 */
export const ClaimTrace = t.intersection([t.type({ traceparent: t.string }), t.partial({ tracestate: t.string })]);
export type ClaimTrace = t.TypeOf<typeof ClaimTrace>;
/**
 * `channel`: the name of the key that claimed the GUID (CONTRACT.md §6); absent when `serve` ran without keys.
 * `trace`: the claim's trace context; absent in claims written before it was kept (and by `Claim` without one).
 */
export const ClaimedData = t.intersection([
  t.type({ request: t.union([t.string, t.null]), fingerprint: t.string }),
  t.partial({ channel: t.string, trace: ClaimTrace }),
]);
export const SentData = t.type({ attempt: PositiveInt, timeoutMs: NonNegativeInt });
export const AnsweredData = t.type({
  attempt: PositiveInt,
  code: DefiniteCode,
  response: t.union([t.string, t.null]),
  latencyMs: t.number,
});
export const TimedOutReason = t.keyof({ timeout: null, reset: null, 'non-definite': null, orphaned: null });
export type TimedOutReason = t.TypeOf<typeof TimedOutReason>;
/** Why a call's outcome is unknown, as the account client reports it (`orphaned` is the sweep's alone). */
export type CallUnknownReason = Exclude<TimedOutReason, 'orphaned'>;
export const TimedOutData = withDetail({ attempt: PositiveInt, reason: TimedOutReason });
export const ConnectFailedReason = t.keyof({ refused: null, 'connect-timeout': null, 'never-sent': null });
export type ConnectFailedReason = t.TypeOf<typeof ConnectFailedReason>;
/** Why a call certainly never left, as the account client reports it (`never-sent` is the sweep's alone). */
export type CallFailedReason = Exclude<ConnectFailedReason, 'never-sent'>;
/** attempt is 0 when a RECEIVED row was swept before any Sent. */
export const ConnectFailedData = withDetail({ attempt: NonNegativeInt, reason: ConnectFailedReason });
export const ResolvedData = t.union([
  t.type({
    source: t.keyof({ inquiry: null, 'late-answer': null }),
    outcome: t.literal('processed'),
    code: DefiniteCode,
    response: t.union([t.string, t.null]),
  }),
  t.type({ source: t.literal('inquiry'), outcome: t.literal('absent'), code: t.null, response: t.null }),
]);
/**
 * `responseSha256`: SHA-256 (hex) of the account system's answer as it was stored, or null when there was none,
 * so that an auditor can still match the tombstone against the account system's record. Purged events written
 * before it existed have no such field.
 */
export const PurgedData = t.intersection([
  t.type({ retentionMs: NonNegativeInt, code: t.union([t.string, t.null]) }),
  t.partial({ responseSha256: t.union([t.string, t.null]) }),
]);

/**
 * A definite answer to an attempt the row had already moved past (a later attempt was sent), or to its attempt once
 * the row was settled another way (an inquiry, purge): a fact an auditor must see, never dropped, and no transition
 * (evolve.ts). An older attempt answered means that attempt reached the account system after another one was sent:
 * the transfer may have been applied twice. `currentAttempt`: the row's attempt when the answer came. `response`:
 * the answer's bytes, null when the row was PURGED (as purge keeps no answer); `responseSha256` is always kept, so
 * that a purge that later redacts `response` still leaves what to match the account system's record against.
 */
export const StaleAnswerData = t.type({
  attempt: PositiveInt,
  currentAttempt: PositiveInt,
  code: DefiniteCode,
  response: t.union([t.string, t.null]),
  responseSha256: t.string,
  latencyMs: t.number,
});

export const eventDataCodecs = {
  Claimed: ClaimedData,
  Sent: SentData,
  Answered: AnsweredData,
  TimedOut: TimedOutData,
  ConnectFailed: ConnectFailedData,
  Resolved: ResolvedData,
  Purged: PurgedData,
  StaleAnswer: StaleAnswerData,
} as const;
export type EventType = keyof typeof eventDataCodecs;
export const EVENT_TYPES = Object.keys(eventDataCodecs) as EventType[];

type DataOf<K extends EventType> = t.TypeOf<(typeof eventDataCodecs)[K]>;

/** An event as the domain produces it, before it has a seq or position. */
export type NewEvent = { [K in EventType]: { type: K; at: number; data: DataOf<K> } }[EventType];
/** What decided an event, beside who wrote it: the flags in force (min-age, timeout, grace, …), an inquiry's HTTP status. */
export const ActorParams = t.record(t.string, t.union([t.string, t.number, t.boolean, t.null]));
export type ActorParams = t.TypeOf<typeof ActorParams>;
/** The process that wrote an event: the command (or `serve`), its host and pid. Given once when the store is opened. */
export const ProcessActor = t.type({ by: t.string, host: t.string, pid: t.number });
export type ProcessActor = t.TypeOf<typeof ProcessActor>;
/** What the writer of one append adds where the decision is made: the key it came with (keys on) and the parameters. */
export interface EventAudit {
  readonly key?: string | undefined;
  readonly params?: ActorParams | undefined;
  /**
   * The outcome the append records is the reply to the channel's own request (never stored): no `transfer.settled`
   * for it (src/events/notifications.ts).
   */
  readonly replied?: boolean | undefined;
  /** The attempt cap in force, when the writer knows it and its parameters do not say it (never stored): dead letters. */
  readonly cap?: number | undefined;
}
/** Who wrote an event (stored beside its data in `events.actor`; evolve and decide never read it). */
export const Actor = t.intersection([ProcessActor, t.partial({ key: t.string, params: ActorParams })]);
export type Actor = t.TypeOf<typeof Actor>;

/** The actor of one append: the process part with the per-append key and parameters (null: no process part given). */
export function actorOf(process: ProcessActor | undefined, audit: EventAudit | undefined): Actor | null {
  if (process === undefined) return null;
  const { by, host, pid } = process;
  return {
    by, host, pid,
    ...(audit?.key === undefined ? {} : { key: audit.key }),
    ...(audit?.params === undefined ? {} : { params: audit.params }),
  };
}

/**
 * `actorOf` for one process part, made once per audit value: a relay hands the same audit for every request of a
 * key (`sendAudit`), so each of its events gets the same actor value, which the store encodes once.
 */
export function actorsOf(process: ProcessActor | undefined): (audit: EventAudit | undefined) => Actor | null {
  const made = new WeakMap<EventAudit, Actor | null>();
  const plain = actorOf(process, undefined);
  return (audit) => {
    if (audit === undefined) return plain;
    let actor = made.get(audit);
    if (actor === undefined) made.set(audit, (actor = actorOf(process, audit)));
    return actor;
  };
}

/** An event as the log holds it; `actor` is null for events written before actors were recorded (or without one). */
export type StoredEvent = NewEvent & { guid: string; seq: number; position: number; actor: Actor | null };

export type EventOf<K extends EventType> = Extract<NewEvent, { type: K }>;
