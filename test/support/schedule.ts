import * as E from 'fp-ts/lib/Either.js';
/**
 * Concurrent duplicate schedules against the real relay, in one process: the relay is `buildApp` over a real
 * SQLite file (inline writer, the same code `serve` runs), channels reach it with `app.inject`, the relay
 * reaches the bundled simulator over real loopback HTTP, and `resolve`, `reprocess` and `purge` are the library
 * functions of the operator commands, on their own connection to the same file (as separate processes would be).
 *
 * Time: every ledger timestamp comes from one virtual clock that moves only when the schedule says `tick`,
 * so whether the orphan sweep, `resolve --min-age` and `purge --retention` select a row is decided by the
 * schedule, not by how fast this machine is. The account system's own time (its timeouts, `processingMs`)
 * stays real; `resolve` is run only once the account system has finished with the GUIDs it will ask about
 * (that is what `--min-age` promises the operator; see `awaitAccountSettled`).
 *
 * A freeze and a late acknowledgement are in-process too (`stoppable`): the relay's ledger calls and the answers it
 * hears wait, while ticks move the virtual clock that the sweep and the relay's send window both read.
 *
 * A crash is in-process: the relay's ledger wrapper refuses every call from that moment (nothing in flight is
 * recorded, the replies are thrown away as a channel would lose them), the connection is closed, and a new
 * relay opens the file, sweeps and serves.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { sleep } from './waitFor.js';
import type { FastifyInstance } from 'fastify';
import { openSqliteStore, type SqliteEventStore } from '../../src/store/sqlite/sqliteStore.js';
import { LedgerUnavailableError } from '../../src/events/errors.js';
import type { EventStore } from '../../src/events/store.js';
import { createAccountClient, type AccountClient, type CallOutcome } from '../../src/account/accountClient.js';
import { buildApp } from '../../src/relay/app.js';
import { createMetrics } from '../../src/telemetry/metrics.js';
import { sweepOrphans } from '../../src/send/sweepOrphans.js';
import { resolveUnknown } from '../../src/commands/resolve.js';
import { settleOnce } from '../../src/commands/settler.js';
import { createBreaker } from '../../src/relay/breaker.js';
import { reprocessFailed } from '../../src/commands/reprocess.js';
import { purgeDone } from '../../src/commands/purge.js';
import { startSimulator, type FaultMode, type Simulator } from '../../src/simulator/index.js';
import {
  channelRequest,
  contractFingerprint,
  fieldsOf,
  foldStream,
  healthyCode,
  isDefinite,
  judgeReply,
  ledgerReader,
  replyCode,
  statesBetween,
  VARIANTS,
  type Kind,
  type LedgerReader,
  type Variant,
} from './model.js';
import { orThrow } from '../../src/events/storeResult.js';
import { ledgerProjection } from '../../src/projections/ledgerProjection.js';

// ---------------------------------------------------------------------------------------------------------
// Schedules

export type Action =
  | { readonly do: 'send'; readonly ch: number; readonly g: number; readonly v: Variant }
  | { readonly do: 'fault'; readonly g: number; readonly mode: FaultMode }
  | { readonly do: 'refuse'; readonly ms: number }
  | { readonly do: 'crash'; readonly downMs: number }
  /** The relay's next claim (the write of a Sent) is committed, but acknowledged to it only `ms` (real) later. */
  | { readonly do: 'delay-ack'; readonly ms: number }
  /** The relay stops for `ms` (real), as under SIGSTOP: nothing it does with the ledger or hears back moves meanwhile. */
  | { readonly do: 'freeze'; readonly ms: number }
  | { readonly do: 'tick'; readonly ms: number }
  | { readonly do: 'resolve'; readonly minAgeMs: number }
  /** One run of serve's background settler (settleOnce: resolve on the rows whose next inquiry is due). */
  | { readonly do: 'settle'; readonly minAgeMs: number }
  | { readonly do: 'reprocess'; readonly maxAttempts: number }
  | { readonly do: 'purge'; readonly retentionMs: number };

export interface Round<A = Action> {
  /** Released one at a time in the order fast-check's scheduler picks, each started without waiting for it. */
  readonly actions: readonly A[];
  /** Real milliseconds between one release and the next. */
  readonly gapsMs: readonly number[];
  /** Wait for everything in flight before the round's checkpoint (a quiet point). */
  readonly settle: boolean;
}

/** What every schedule has, in-process or over processes; `A` is its kind of action. */
export interface ScheduleBase<A> {
  /** One per GUID `G0`, `G1`, …: what the account system answers it with when healthy. */
  readonly kinds: readonly Kind[];
  /** K channels; each sends one request at a time but gives up waiting after `patienceMs` and goes on. */
  readonly channels: number;
  readonly patienceMs: number;
  /** The account system's behaviour per GUID at the start (simulator `byGuid`). */
  readonly faults: readonly FaultMode[];
  readonly e500Rate: number;
  readonly rounds: readonly Round<A>[];
}

export interface Schedule extends ScheduleBase<Action> {
  readonly timeoutMs: number;
  readonly graceMs: number;
  readonly maxAttempts: number;
  readonly processingMs: number;
  /** The relay's `--breaker-failures` (0: off); its cooldown is 250 ms of the virtual clock. */
  readonly breakerFailures: number;
}

const MODES: readonly FaultMode[] = ['answer', 'late-answer', 'reset', 'hold', 'garbage', 'e500'];
const modeArb: fc.Arbitrary<FaultMode> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<FaultMode>('answer') },
  { weight: 5, arbitrary: fc.constantFrom<FaultMode>(...MODES.filter((m) => m !== 'answer')) },
);

export interface ScheduleLimits {
  readonly maxGuids: number;
  readonly maxChannels: number;
  readonly maxRounds: number;
  readonly maxActions: number;
}

export const DEFAULT_LIMITS: ScheduleLimits = { maxGuids: 5, maxChannels: 4, maxRounds: 8, maxActions: 7 };

export function actionArb(guids: number, channels: number): fc.Arbitrary<Action> {
  const g = fc.nat(guids - 1);
  return fc.oneof(
    { weight: 12, arbitrary: fc.record({ do: fc.constant('send' as const), ch: fc.nat(channels - 1), g, v: fc.constantFrom<Variant>('base', 'base', 'cosmetic', 'header', 'changed') }) },
    { weight: 3, arbitrary: fc.record({ do: fc.constant('fault' as const), g, mode: modeArb }) },
    { weight: 1, arbitrary: fc.record({ do: fc.constant('refuse' as const), ms: fc.constantFrom(30, 150) }) },
    { weight: 2, arbitrary: fc.record({ do: fc.constant('crash' as const), downMs: fc.constantFrom(0, 20, 100) }) },
    { weight: 1, arbitrary: fc.record({ do: fc.constant('delay-ack' as const), ms: fc.constantFrom(30, 300) }) },
    { weight: 1, arbitrary: fc.record({ do: fc.constant('freeze' as const), ms: fc.constantFrom(30, 300) }) },
    { weight: 3, arbitrary: fc.record({ do: fc.constant('tick' as const), ms: fc.constantFrom(1, 50, 250, 100_000) }) },
    { weight: 2, arbitrary: fc.record({ do: fc.constant('resolve' as const), minAgeMs: fc.constantFrom(1, 100, 1000) }) },
    { weight: 2, arbitrary: fc.record({ do: fc.constant('settle' as const), minAgeMs: fc.constantFrom(1, 100, 1000) }) },
    { weight: 2, arbitrary: fc.record({ do: fc.constant('reprocess' as const), maxAttempts: fc.constantFrom(1, 3, 6) }) },
    { weight: 1, arbitrary: fc.record({ do: fc.constant('purge' as const), retentionMs: fc.constantFrom(0, 200, 100_000) }) },
  );
}

export function scheduleArb(limits: ScheduleLimits = DEFAULT_LIMITS): fc.Arbitrary<Schedule> {
  return fc
    .record({ guids: fc.integer({ min: 1, max: limits.maxGuids }), channels: fc.integer({ min: 1, max: limits.maxChannels }) })
    .chain(({ guids, channels }) =>
      fc.record({
        kinds: fc.array(fc.constantFrom<Kind>('ok', 'ok', 'ok', 'insufficient', 'unknown-account'), { minLength: guids, maxLength: guids }),
        channels: fc.constant(channels),
        patienceMs: fc.constantFrom(10, 40, 1000),
        faults: fc.array(modeArb, { minLength: guids, maxLength: guids }),
        e500Rate: fc.constantFrom(0, 0, 0.2),
        timeoutMs: fc.constantFrom(60, 120),
        graceMs: fc.constantFrom(30, 80),
        maxAttempts: fc.constantFrom(1, 2, 3, 5),
        processingMs: fc.constantFrom(0, 0, 40, 250),
        breakerFailures: fc.constantFrom(0, 1, 2, 4),
        rounds: fc.array(
          fc.record({
            actions: fc.array(actionArb(guids, channels), { minLength: 1, maxLength: limits.maxActions }),
            gapsMs: fc.array(fc.constantFrom(0, 0, 1, 5, 20, 60), { maxLength: limits.maxActions }),
            settle: fc.boolean(),
          }),
          { minLength: 1, maxLength: limits.maxRounds },
        ),
      }),
    );
}

export const actionCount = (sc: Schedule): number => sc.rounds.reduce((n, r) => n + r.actions.length, 0);

export function describeAction(a: Action): string {
  switch (a.do) {
    case 'send': return `send ch${a.ch} G${a.g} ${a.v}`;
    case 'fault': return `fault G${a.g} ${a.mode}`;
    case 'refuse': return `refuse ${a.ms}ms`;
    case 'crash': return `crash (down ${a.downMs}ms)`;
    case 'delay-ack': return `the relay's next claim acknowledged ${a.ms}ms late`;
    case 'freeze': return `relay frozen ${a.ms}ms`;
    case 'tick': return `tick +${a.ms}ms`;
    case 'resolve': return `resolve --min-age ${a.minAgeMs}ms`;
    case 'settle': return `settler run (--min-age ${a.minAgeMs}ms)`;
    case 'reprocess': return `reprocess --max-attempts ${a.maxAttempts}`;
    case 'purge': return `purge --retention ${a.retentionMs}ms`;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Harness pieces

/**
 * What a run needs of fast-check's scheduler: it releases each round's actions one at a time, in its order.
 * Hand-written schedules (the regression tests) use `inOrder()`: the actions start in the order listed.
 */
export type Releaser = Pick<fc.Scheduler, 'schedule' | 'waitNext'>;

export function inOrder(): Releaser {
  const queue: Array<() => void> = [];
  return {
    schedule<T>(task: Promise<T>): Promise<T> {
      return new Promise<void>((release) => queue.push(release)).then(() => task);
    },
    async waitNext(count: number): Promise<void> {
      for (let i = 0; i < count; i++) {
        queue.shift()?.();
        // Let the released action start before the next one is released.
        for (let t = 0; t < 5; t++) await Promise.resolve();
      }
    },
  } as Releaser;
}

export class InvariantViolation extends Error {
  override readonly name = 'InvariantViolation';
}

export { sleep }; // scheduleProcess.ts takes it from here

/**
 * Starts a round's actions in the order the releaser picks, `gapsMs[i]` real milliseconds apart; each is
 * launched without waiting for it. Shared by the in-process and the process schedules.
 */
export async function releaseRound<A>(
  s: Releaser,
  round: { readonly actions: readonly A[]; readonly gapsMs: readonly number[] },
  ri: number,
  describe: (a: A) => string,
  launch: (a: A, label: string) => void,
): Promise<void> {
  round.actions.forEach((a, i) => {
    const label = `r${ri}.${i} ${describe(a)}`;
    void s.schedule(Promise.resolve(label), label).then(() => launch(a, label));
  });
  for (let i = 0; i < round.actions.length; i++) {
    await s.waitNext(1);
    const gap = round.gapsMs[i] ?? 0;
    if (gap > 0) await sleep(gap);
  }
}

/** A channel sends one request at a time, but stops waiting for its previous one after `patienceMs`. */
export function onChannel(busy: Array<Promise<unknown>>, ch: number, patienceMs: number, send: () => Promise<void>): Promise<void> {
  const prev = busy[ch]!;
  const mine = (async () => {
    await Promise.race([prev, sleep(patienceMs)]);
    await send();
  })();
  busy[ch] = mine;
  return mine;
}

/** The account system's side of a schedule action: a GUID's fault, or a window of refused connections. */
export function simulatorStep(
  sim: Simulator,
  faultMap: Record<string, FaultMode>,
  refusals: Promise<void>[],
  guids: readonly string[],
  a: { readonly do: 'fault'; readonly g: number; readonly mode: FaultMode } | { readonly do: 'refuse'; readonly ms: number },
): void {
  if (a.do === 'fault') setGuidFault(sim, faultMap, guids[a.g]!, a.mode);
  else refusals.push(sim.refuseConnections(a.ms));
}

/** What the channels sent per GUID (which payload variants), and which variant a ledger fingerprint is. */
export class SentBook {
  readonly variants = new Map<string, Set<Variant>>();
  constructor(
    private readonly guids: readonly string[],
    private readonly kinds: readonly Kind[],
  ) {}
  fingerprintOf(g: number, v: Variant): string {
    return contractFingerprint(fieldsOf(this.guids[g]!, this.kinds[g]!, v, g));
  }
  classOf(g: number, fingerprint: string): Variant | null {
    return VARIANTS.find((v) => this.fingerprintOf(g, v) === fingerprint) ?? null;
  }
  note(guid: string, v: Variant): void {
    let set = this.variants.get(guid);
    if (set === undefined) this.variants.set(guid, (set = new Set()));
    set.add(v);
  }
}

/** Gives one GUID a fault in the simulator (`answer` clears it), keeping the others'. */
export function setGuidFault(sim: Simulator, faultMap: Record<string, FaultMode>, guid: string, mode: FaultMode): void {
  if (mode === 'answer') delete faultMap[guid];
  else faultMap[guid] = mode;
  sim.setFaults({ byGuid: { ...faultMap } });
}

/**
 * Watches every POST /transfer the relay (and reprocess) makes. At the moment of each call the row must be
 * SENT at an attempt no earlier call used: every call has its own durable Sent, and no call is made for an
 * UNKNOWN (or any other) row. It also counts calls per GUID so the simulator's own count can be compared.
 */
export class CallTracker {
  private readonly perGuid = new Map<string, { calls: number; reachable: number; inflight: number; lastSettled: number; lastAttempt: number }>();
  readonly violations: string[] = [];
  constructor(private readonly reader: LedgerReader) {}

  private entry(guid: string) {
    let e = this.perGuid.get(guid);
    if (e === undefined) {
      e = { calls: 0, reachable: 0, inflight: 0, lastSettled: 0, lastAttempt: 0 };
      this.perGuid.set(guid, e);
    }
    return e;
  }
  calls(guid: string): number {
    return this.perGuid.get(guid)?.calls ?? 0;
  }
  /** Calls that may have reached the account system (in flight, or ended other than "not sent"). */
  reachable(guid: string): number {
    return this.perGuid.get(guid)?.reachable ?? 0;
  }
  inflight(guid: string): number {
    return this.perGuid.get(guid)?.inflight ?? 0;
  }
  lastSettled(guid: string): number {
    return this.perGuid.get(guid)?.lastSettled ?? 0;
  }
  wrap(client: AccountClient, dead: () => boolean, who: string): AccountClient {
    return {
      transfer: async (body: string | Uint8Array, asked: string): Promise<CallOutcome> => {
        const text = typeof body === 'string' ? body : Buffer.from(body).toString('utf8');
        const guid = String((JSON.parse(text) as { guid?: unknown }).guid);
        // The process is gone: its call never leaves (and nothing it learns will be recorded).
        if (dead()) return { kind: 'failed', reason: 'refused', detail: 'the relay crashed before the call', latencyMs: 0 };
        const row = this.reader.row(guid);
        const e = this.entry(guid);
        if (row === null || row.status !== 'SENT' || row.attempts <= e.lastAttempt) {
          this.violations.push(
            `${who} called the account system for ${guid} while its row was ${row === null ? 'absent' : `${row.status} at attempt ${row.attempts}`} ` +
              `(the last call was for attempt ${e.lastAttempt}): every call needs its own durable Sent, and never while UNKNOWN`,
          );
        }
        if (row !== null) e.lastAttempt = Math.max(e.lastAttempt, row.attempts);
        e.calls++;
        e.reachable++;
        e.inflight++;
        try {
          const out = await client.transfer(body, asked);
          if (out.kind === 'failed') e.reachable--;
          return out;
        } finally {
          e.inflight--;
          e.lastSettled = Date.now();
        }
      },
      inquire: (guid: string) => client.inquire(guid),
      close: () => client.close(),
    };
  }
}

/** The store as a relay process sees it: from the crash on, every call fails as if the process were gone. */
export function crashable(store: EventStore, dead: () => boolean): EventStore {
  const gone = () => Promise.resolve(E.left(new LedgerUnavailableError('the relay crashed')));
  return {
    appendEvents: (...a) => (dead() ? gone() : store.appendEvents(...a)),
    execute: (...a) => (dead() ? gone() : store.execute(...a)),
    readStream: (...a) => (dead() ? gone() : store.readStream(...a)),
    readAll: (...a) => (dead() ? gone() : store.readAll(...a)),
    getLedger: (...a) => (dead() ? gone() : store.getLedger(...a)),
    queryLedger: (...a) => (dead() ? gone() : store.queryLedger(...a)),
    countLedger: (...a) => (dead() ? gone() : store.countLedger(...a)),
    removeTombstones: (...a) => (dead() ? gone() : store.removeTombstones(...a)),
    recordUnclearInquiry: (...a) => (dead() ? gone() : store.recordUnclearInquiry(...a)),
    recordRequests: (...a) => (dead() ? gone() : store.recordRequests(...a)),
    readRequests: (...a) => (dead() ? gone() : store.readRequests(...a)),
    recordKeyUses: (...a) => (dead() ? gone() : store.recordKeyUses(...a)),
    keyUses: () => (dead() ? gone() : store.keyUses()),
    spaceOnDisk: () => (dead() ? gone() : store.spaceOnDisk()),
    reclaimSpace: () => (dead() ? gone() : store.reclaimSpace()),
    countByStatus: () => (dead() ? gone() : store.countByStatus()),
    rebuildProjection: () => (dead() ? gone() : store.rebuildProjection()),
    verifyProjection: () => (dead() ? gone() : store.verifyProjection()),
    leaseRows: (...a) => (dead() ? gone() : store.leaseRows(...a)),
    leaseNotifications: (...a) => (dead() ? gone() : store.leaseNotifications(...a)),
    recordDeliveries: (...a) => (dead() ? gone() : store.recordDeliveries(...a)),
    redeliverNotifications: (...a) => (dead() ? gone() : store.redeliverNotifications(...a)),
    listNotifications: (...a) => (dead() ? gone() : store.listNotifications(...a)),
    notificationAttempts: (...a) => (dead() ? gone() : store.notificationAttempts(...a)),
    notificationCounts: () => (dead() ? gone() : store.notificationCounts()),
    releaseLeases: (...a) => (dead() ? gone() : store.releaseLeases(...a)),
    now: () => (dead() ? gone() : store.now()),
    recordReconciliation: (...a) => (dead() ? gone() : store.recordReconciliation(...a)),
    reconciliations: (...a) => (dead() ? gone() : store.reconciliations(...a)),
    reconciliation: (...a) => (dead() ? gone() : store.reconciliation(...a)),
    reconciliationBreaks: (...a) => (dead() ? gone() : store.reconciliationBreaks(...a)),
    ledgerStanding: () => (dead() ? gone() : store.ledgerStanding()),
    missingEvents: (...a) => (dead() ? gone() : store.missingEvents(...a)),
    readMark: () => (dead() ? gone() : store.readMark()),
    connectionEvents: () => store.connectionEvents(),
    writeMark: (...a) => (dead() ? gone() : store.writeMark(...a)),
    ping: () => (dead() ? gone() : store.ping()),
    close: () => store.close(),
  };
}

/** What can stop a relay process from hearing its ledger and the account system: a freeze, a late acknowledgement. */
export interface Stoppable {
  /** Set while the relay is frozen; resolves when it runs again. */
  frozen: Promise<void> | null;
  /** Set by `delay-ack`: how late the next claim's acknowledgement comes (real ms), once. */
  delayNextClaimMs: number | null;
  /** When it was frozen or an acknowledgement was held back (performance.now(); `to` Infinity while it lasts). */
  readonly stalls: Array<{ from: number; to: number }>;
}

/** Runs `work` as a stall of `relay`: its ledger was out of its reach meanwhile. */
async function stalling<T>(relay: Stoppable, work: () => Promise<T>): Promise<T> {
  const stall = { from: performance.now(), to: Number.POSITIVE_INFINITY };
  relay.stalls.push(stall);
  try {
    return await work();
  } finally {
    stall.to = performance.now();
  }
}

/**
 * The store as a relay process sees it (`stoppable`): while it is frozen nothing it asks starts, and nothing it asked
 * is heard back; after `delay-ack` its next claim (a write of a Sent) is committed at once and acknowledged late.
 */
export function stoppable(store: EventStore, relay: Stoppable): EventStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver) as unknown;
      if (typeof value !== 'function') return value;
      const method = value as (...a: unknown[]) => Promise<unknown>;
      if (prop === 'close') return method.bind(target);
      return async (...args: unknown[]) => {
        await relay.frozen;
        const result = await method.apply(target, args);
        const command = prop === 'execute' ? (args[1] as { type: string }) : null;
        if (relay.delayNextClaimMs !== null && (command?.type === 'Submit' || command?.type === 'Send')) {
          const ms = relay.delayNextClaimMs;
          relay.delayNextClaimMs = null;
          await stalling(relay, () => sleep(ms));
        }
        await relay.frozen;
        return result;
      };
    },
  });
}

/**
 * The account client as a frozen relay uses it: an inquiry does not start, and no answer is heard, while it is frozen.
 * A call already past the send window's check is on the wire: a freeze right between the check and the request
 * leaving is what the other half of the grace is for, and virtual time jumps (ticks) are not such a pause.
 */
export function stoppableAccount(account: AccountClient, relay: Stoppable): AccountClient {
  return {
    transfer: async (body, guid) => {
      const outcome = await account.transfer(body, guid);
      await relay.frozen;
      return outcome;
    },
    inquire: async (guid) => {
      await relay.frozen;
      const answer = await account.inquire(guid);
      await relay.frozen;
      return answer;
    },
    close: () => account.close(),
  };
}

interface Incarnation extends Stoppable {
  readonly id: number;
  dead: boolean;
  readonly timeoutMs: number;
  readonly app: FastifyInstance;
  readonly store: SqliteEventStore;
  readonly client: AccountClient;
  readonly timer: NodeJS.Timeout;
}

export interface RunOptions {
  readonly dir: string;
  /** Used in file names. */
  readonly runId: number;
  /** The relay's call timeout during the healing phase (generous: it must converge on a loaded machine). */
  readonly healTimeoutMs?: number;
  readonly maxHealRounds?: number;
  /** Receives the run's trace at the end (for debugging and the regression notes). */
  readonly onTrace?: (lines: readonly string[]) => void;
}

export interface RunResult {
  readonly actions: number;
  readonly sends: number;
  readonly replies: Record<string, number>;
  readonly crashes: number;
  readonly healRounds: number;
  /** E902 replies of an open breaker (nothing claimed for them). */
  readonly breakerRefusals: number;
  /** Freezes and late claim acknowledgements that took place (a relay was up to take them). */
  readonly stalls: number;
  readonly ms: number;
}

const T0 = 1_767_225_600_000; // 2026-01-01, the virtual clock's start
const TOMBSTONES_KEPT_MS = 10 * 365 * 86_400_000;

// ---------------------------------------------------------------------------------------------------------
// One schedule

export async function runSchedule(sc: Schedule, s: Releaser, opts: RunOptions): Promise<RunResult> {
  const started = Date.now();
  const healTimeoutMs = opts.healTimeoutMs ?? 3000;
  const maxHealRounds = opts.maxHealRounds ?? 12;
  const db = join(opts.dir, `sched-${opts.runId}.db`);
  const guids = sc.kinds.map((_, i) => `G${i}`);

  let now = T0;
  const clock = (): number => now;
  const trace: string[] = [];
  const violations: string[] = [];
  const log = (line: string) => trace.push(`${String(Date.now() - started).padStart(5)}ms v+${now - T0}  ${line}`);
  const violate = (line: string) => {
    violations.push(line);
    log(`VIOLATION ${line}`);
  };

  const faultMap: Record<string, FaultMode> = {};
  sc.faults.forEach((m, i) => {
    if (m !== 'answer') faultMap[guids[i]!] = m;
  });
  const sim: Simulator = await startSimulator({
    port: 0,
    faults: { byGuid: { ...faultMap }, e500Rate: sc.e500Rate, seed: 7, processingMs: sc.processingMs, lateMs: sc.timeoutMs + 40 },
  });
  const ops = openSqliteStore({ projection: ledgerProjection, path: db, clock, synchronous: 'NORMAL' });
  const reader = ledgerReader(ops.db);
  const tracker = new CallTracker(reader);
  const inquiry = createAccountClient({ baseUrl: sim.url, timeoutMs: 1000 });
  // The first HTTP exchange of a process compiles undici's parser (tens of ms here): done before any call whose
  // deadline is a schedule's 60 ms, which no byte may outlive.
  await inquiry.inquire('warm-up');
  const reprocessRaw = createAccountClient({ baseUrl: sim.url, timeoutMs: sc.timeoutMs });
  const reprocessClient = tracker.wrap(reprocessRaw, () => false, 'reprocess');
  let healReprocessRaw: AccountClient | null = null;

  const inflight = new Set<Promise<unknown>>();
  const track = <T>(p: Promise<T>): Promise<T> => {
    inflight.add(p);
    void p.finally(() => inflight.delete(p)).catch(() => undefined);
    return p;
  };
  const drain = async (): Promise<void> => {
    while (inflight.size > 0) await Promise.allSettled([...inflight]);
  };
  const refusals: Promise<void>[] = [];

  let incarnations = 0;
  let crashes = 0;
  let current: Incarnation | null = null;
  let restarting: Promise<void> | null = null;
  const graveyard: Incarnation[] = [];

  const startRelay = async (timeoutMs: number): Promise<Incarnation> => {
    const store = openSqliteStore({ projection: ledgerProjection, path: db, clock, synchronous: 'NORMAL' });
    const id = ++incarnations;
    const box: { dead: boolean } & Stoppable = { dead: false, frozen: null, delayNextClaimMs: null, stalls: [] };
    const guarded = crashable(stoppable(store, box), () => box.dead);
    const swept = await orThrow(sweepOrphans(guarded, sc.graceMs, clock()));
    const client = createAccountClient({ baseUrl: sim.url, timeoutMs });
    const account = stoppableAccount(tracker.wrap(client, () => box.dead, `relay#${id}`), box);
    const metrics = createMetrics(guarded, clock);
    const breaker = createBreaker({ failures: sc.breakerFailures, cooldownMs: 250, clock, metrics });
    // Min-age 0 for the inquiry before a resend (here and in reprocess): ages are judged by the ledger's clock, the
    // virtual one, which moves only on ticks; the min-age trap is kept out by the harness itself, which waits out
    // the account system's processing (real time) before every resolve.
    // The send window is measured on the virtual clock, the one the sweep judges by: a tick while a claim is being
    // acknowledged is time that passed for both.
    const app = buildApp({ store: guarded, account, metrics, timeoutMs, maxAttempts: sc.maxAttempts, breaker, minAgeMs: 0, graceMs: sc.graceMs, monotonicNow: clock });
    await app.ready();
    // Like serve: a sweep at least once per timeout.
    const timer = setInterval(() => {
      if (!box.dead) void orThrow(sweepOrphans(guarded, sc.graceMs, clock())).catch(() => undefined);
    }, Math.max(20, Math.min(timeoutMs, sc.graceMs)));
    const inc: Incarnation = Object.assign(box, { id, timeoutMs, app, store, client, timer });
    log(`relay#${id} up (timeout ${timeoutMs}ms); start sweep: never-sent ${swept.neverSent}, orphaned ${swept.orphaned}`);
    return inc;
  };
  const kill = (inc: Incarnation): void => {
    inc.dead = true;
    clearInterval(inc.timer);
    graveyard.push(inc);
    void inc.store.close().catch(() => undefined);
  };

  // Per GUID: which variants the channels sent, the first definite answer, the last reply per variant.
  const book = new SentBook(guids, sc.kinds);
  const sentVariants = book.variants;
  const firstDefinite = new Map<string, string>();
  const lastReply = new Map<string, { code: string; body: string; replayed: boolean }>();
  const replies: Record<string, number> = {};
  let sends = 0;
  let breakerRefusals = 0;
  let stalls = 0;

  const fingerprintOf = (g: number, v: Variant) => book.fingerprintOf(g, v);
  const classOf = (g: number, fp: string) => book.classOf(g, fp);

  const send = async (g: number, v: Variant, label: string): Promise<void> => {
    const guid = guids[g]!;
    const req = channelRequest(guid, sc.kinds[g]!, v, g);
    sends++;
    book.note(guid, v);
    const inc = current;
    if (inc === null || inc.dead) {
      log(`${label}: relay down (connection refused)`);
      return;
    }
    const before = reader.row(guid);
    const sentAt = performance.now();
    const virtualSentAt = now;
    const res = await inc.app.inject({ method: 'POST', url: '/v1/transfers', payload: req.body, headers: { 'content-type': 'application/json', ...req.headers } });
    if (inc.dead) {
      log(`${label}: relay#${inc.id} crashed before the reply reached the channel`);
      return;
    }
    const observed = { status: res.statusCode, body: res.body, replayed: res.headers['idempotent-replayed'] === 'true' };
    const { code } = replyCode(observed);
    replies[code] = (replies[code] ?? 0) + 1;
    if (code === 'E902' && res.body.includes('breaker open')) breakerRefusals++;
    const after = reader.row(guid);
    const between = statesBetween(reader, guid, before);
    for (const i of between.illegal) violate(`${guid}: illegal transition in the log: ${i}`);
    log(`${label} → ${code} ${res.statusCode}${observed.replayed ? ' replayed' : ''}; states ${between.states.map((st) => `${st.status}#${st.lastSeq}`).join('→')}`);
    lastReply.set(`${guid}/${v}`, { code, body: res.body, replayed: observed.replayed });
    if (after !== null && classOf(g, after.fingerprint) === null) violate(`${guid}: the ledger fingerprint ${after.fingerprint} is none of the contract fingerprints of what was sent`);
    for (const why of judgeReply(observed, {
      requestFingerprint: req.fingerprint,
      rowFingerprint: after?.fingerprint ?? null,
      states: between.states,
      absentBefore: before === null,
      maxAttempts: sc.maxAttempts,
      firstDefinite: firstDefinite.get(guid),
      // A tick while the request was answered is the ledger taking that long, as far as the relay's clock tells.
      claimDelayed: now !== virtualSentAt || inc.stalls.some((st) => st.from <= performance.now() && st.to >= sentAt),
    })) violate(`${guid} ${v}: ${why}`);
    if (isDefinite(code)) {
      const first = firstDefinite.get(guid);
      if (first === undefined) firstDefinite.set(guid, res.body);
      else if (first !== res.body) violate(`${guid}: a definite answer differs from the first one, byte for byte:\n  first ${first}\n  now   ${res.body}`);
    }
  };

  const channelBusy: Array<Promise<unknown>> = Array.from({ length: sc.channels }, () => Promise.resolve());

  /**
   * The operator's promise behind `--min-age`: the account system has finished with every GUID resolve will
   * ask about. With the simulator's latency at 0 it has applied a POST (or never will) by the time it counted
   * it; after that, its inquiry answers 404 for `processingMs` more.
   */
  const awaitAccountSettled = async (candidates: readonly string[]): Promise<void> => {
    if (candidates.length === 0) return;
    const deadline = Date.now() + 5000;
    for (;;) {
      const stats = sim.stats();
      const pending = candidates.filter(
        (g) => (stats.calls[g] ?? 0) < tracker.reachable(g) && !(tracker.inflight(g) === 0 && Date.now() - tracker.lastSettled(g) > 250),
      );
      if (pending.length === 0 || Date.now() > deadline) break;
      await sleep(5);
    }
    await sleep(sc.processingMs + 15);
  };

  const runResolve = async (minAgeMs: number, label: string, how: 'resolve' | 'settle' = 'resolve'): Promise<void> => {
    for (;;) {
      const at = now;
      const candidates = reader.rows().filter((r) => (r.status === 'UNKNOWN' || r.status === 'SENT') && r.sentAt !== null && r.sentAt <= at - minAgeMs).map((r) => r.guid);
      await awaitAccountSettled(candidates);
      if (now === at) break; // resolve reads the clock first, synchronously: the same `now` the candidates were picked with
    }
    const summary = how === 'resolve'
      ? await resolveUnknown({ store: ops, account: inquiry, clock }, { minAgeMs, graceMs: sc.graceMs, concurrency: 4 })
      : await settleOnce({ store: ops, account: inquiry, clock, metrics: createMetrics(ops, clock) }, { minAgeMs, graceMs: sc.graceMs, concurrency: 4 });
    log(`${label}: candidates ${summary.candidates} processed ${summary.processed} absent ${summary.absent} still-unknown ${summary.stillUnknown} skipped ${summary.skipped} swept ${JSON.stringify(summary.swept)} ledger-errors ${summary.ledgerErrors}`);
    if (summary.ledgerErrors > 0) violate(`${label}: resolve hit a ledger error on a healthy ledger`);
  };

  const runReprocess = async (maxAttempts: number, timeoutMs: number, client: AccountClient, label: string): Promise<void> => {
    const summary = await reprocessFailed({ store: ops, account: client, monotonicNow: clock }, { maxAttempts, timeoutMs, graceMs: sc.graceMs, concurrency: 4, minAgeMs: 0 });
    log(`${label}: candidates ${summary.candidates} done ${summary.done} failed ${summary.failed} unknown ${summary.unknown} skipped ${summary.skipped} ledger-errors ${summary.ledgerErrors}`);
    if (summary.ledgerErrors > 0) violate(`${label}: reprocess hit a ledger error on a healthy ledger`);
  };

  const launch = (a: Action, label: string): void => {
    const run = async (): Promise<void> => {
      switch (a.do) {
        case 'send':
          await onChannel(channelBusy, a.ch, sc.patienceMs, () => send(a.g, a.v, label));
          return;
        case 'fault':
        case 'refuse':
          simulatorStep(sim, faultMap, refusals, guids, a);
          log(label);
          return;
        case 'crash': {
          if (current === null || restarting !== null) return;
          crashes++;
          log(`${label}: relay#${current.id} killed`);
          kill(current);
          current = null;
          restarting = (async () => {
            await sleep(a.downMs);
            current = await startRelay(sc.timeoutMs);
            restarting = null;
          })();
          await restarting;
          return;
        }
        case 'delay-ack':
          if (current !== null) {
            current.delayNextClaimMs = a.ms;
            stalls++;
          }
          log(label);
          return;
        case 'freeze': {
          const frozen = current;
          if (frozen === null || frozen.frozen !== null) return;
          log(`${label}: relay#${frozen.id}`);
          stalls++;
          await stalling(frozen, async () => {
            frozen.frozen = sleep(a.ms).then(() => {
              frozen.frozen = null;
            });
            await frozen.frozen;
          });
          return;
        }
        case 'tick':
          now += a.ms;
          log(label);
          return;
        case 'resolve':
          return runResolve(a.minAgeMs, label);
        case 'settle':
          return runResolve(a.minAgeMs, label, 'settle');
        case 'reprocess':
          return runReprocess(a.maxAttempts, sc.timeoutMs, reprocessClient, label);
        case 'purge': {
          const summary = await purgeDone({ store: ops, clock }, { retentionMs: a.retentionMs, tombstoneRetentionMs: TOMBSTONES_KEPT_MS });
          log(`${label}: candidates ${summary.candidates} purged ${summary.purged}`);
          return;
        }
      }
    };
    track(
      run().catch((err: unknown) => {
        violate(`${label} threw: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      }),
    );
  };

  const checkpoint = async (where: string): Promise<void> => {
    const stats = sim.stats();
    // 1. at most once
    if (stats.doubleApplied.length > 0) violate(`${where}: the account system applied ${stats.doubleApplied.join(', ')} more than once`);
    for (const [g, n] of Object.entries(stats.applied)) if (n > 1) violate(`${where}: ${g} applied ${n} times`);
    // 2. every call the account system saw was one the relay made for a fresh Sent
    for (const [g, n] of Object.entries(stats.calls)) {
      if (n > tracker.calls(g)) violate(`${where}: the account system saw ${n} calls for ${g}, the relay made ${tracker.calls(g)}`);
    }
    for (const v of tracker.violations.splice(0)) violate(`${where}: ${v}`);
    // the log: only the contract's transitions, and the projection equals an independent fold
    const snap = reader.snapshot();
    const rows = new Map(snap.rows.map((r) => [r.guid, r]));
    for (const [g, events] of snap.events) {
      const folded = foldStream(events);
      for (const i of folded.illegal) violate(`${where}: ${g}: illegal transition in the log: ${i}`);
      const row = rows.get(g);
      const st = folded.state;
      if (row === undefined || st === null || row.status !== st.status || row.attempts !== st.attempts || row.code !== st.code || row.lastSeq !== st.lastSeq) {
        violate(`${where}: ${g}: ledger row ${row === undefined ? 'missing' : `${row.status}/${row.attempts}/${row.code}/#${row.lastSeq}`} is not the fold of its log ${st === null ? '∅' : `${st.status}/${st.attempts}/${st.code}/#${st.lastSeq}`}`);
      }
    }
    // 4. the ledger equals a rebuild from the log
    const diffs = await orThrow(ops.verifyProjection());
    if (diffs.length > 0) violate(`${where}: verifyProjection: ${JSON.stringify(diffs).slice(0, 500)}`);
    if (violations.length > 0) {
      throw new InvariantViolation(
        `${violations.length} invariant violation(s) ${where}:\n- ${violations.slice(0, 8).join('\n- ')}\n\ntrace (last 80 lines):\n${trace.slice(-80).join('\n')}`,
      );
    }
  };

  let healRounds = 0;
  try {
    current = await startRelay(sc.timeoutMs);
    for (const [ri, round] of sc.rounds.entries()) {
      await releaseRound(s, round, ri, describeAction, launch);
      if (round.settle) await drain();
      await checkpoint(`after round ${ri}${round.settle ? ' (quiet)' : ''}`);
    }

    // ---- healing: faults off, resolve past the processing time, reprocess, channels resend until definite ----
    await drain();
    await Promise.all(refusals);
    sim.resetFaults();
    log('heal: faults off');
    while (restarting !== null) await restarting;
    if (current !== null) kill(current);
    current = await startRelay(healTimeoutMs);
    healReprocessRaw = createAccountClient({ baseUrl: sim.url, timeoutMs: healTimeoutMs });
    const healClient = tracker.wrap(healReprocessRaw, () => false, 'reprocess(heal)');
    const sentGuids = guids.filter((g) => sentVariants.has(g));
    let healed = false;
    for (let round = 0; round < maxHealRounds && !healed; round++) {
      healRounds++;
      now += Math.max(sc.timeoutMs, healTimeoutMs) + sc.graceMs + 1;
      await runResolve(1, `heal ${round} resolve`);
      await runReprocess(1000, healTimeoutMs, healClient, `heal ${round} reprocess --max-attempts 1000`);
      await Promise.all(
        sentGuids.map(async (guid) => {
          const g = guids.indexOf(guid);
          for (const v of sentVariants.get(guid)!) await send(g, v, `heal ${round} resend ${guid} ${v}`);
        }),
      );
      await checkpoint(`after heal round ${round}`);
      const open = reader.rows().filter((r) => r.status !== 'DONE' && r.status !== 'PURGED');
      const unanswered = sentGuids.filter((guid) => {
        const g = guids.indexOf(guid);
        const row = reader.row(guid);
        if (row === null) return true;
        const claimer = classOf(g, row.fingerprint);
        return [...sentVariants.get(guid)!].some((v) => {
          const r = lastReply.get(`${guid}/${v}`);
          const sameRequest = claimer !== null && fingerprintOf(g, v) === fingerprintOf(g, claimer);
          return r === undefined || (sameRequest ? !(isDefinite(r.code) || r.code === 'E905') : r.code !== 'E904');
        });
      });
      healed = open.length === 0 && unanswered.length === 0;
      if (!healed) log(`heal ${round}: still open ${open.map((r) => `${r.guid}:${r.status}`).join(' ')}; unanswered ${unanswered.join(' ')}`);
    }
    if (!healed) violate(`healing did not converge in ${maxHealRounds} rounds`);

    // ---- 6. every GUID is DONE and applied exactly once, or rejected with a definite B2xx/E500 ----
    const stats = sim.stats();
    for (const [g, guid] of guids.entries()) {
      const row = reader.row(guid);
      const applied = stats.applied[guid] ?? 0;
      if (!sentVariants.has(guid)) {
        if (row !== null || applied !== 0) violate(`${guid} was never sent, yet it has a row or was applied`);
        continue;
      }
      if (row === null) {
        violate(`${guid} was sent but has no ledger row (lost)`);
        continue;
      }
      if (row.status !== 'DONE' && row.status !== 'PURGED') violate(`${guid} ended ${row.status}, not DONE`);
      const code = row.code ?? '(none)';
      if (code === '0000') {
        if (applied !== 1) violate(`${guid} is DONE 0000 but was applied ${applied} times`);
      } else if (code === 'E500') {
        if (applied !== 0) violate(`${guid} answered E500 but was applied ${applied} times`);
      } else if (code !== healthyCode(sc.kinds[g]!) || applied !== 0) {
        violate(`${guid} (${sc.kinds[g]}) ended ${code} with ${applied} applications`);
      }
      // The answer the channels got is the account system's own, byte for byte.
      const first = firstDefinite.get(guid);
      if (row.status === 'DONE' && first !== undefined && row.response !== first) violate(`${guid}: the ledger's answer is not the first answer the channels got`);
      if (code !== 'E500' && isDefinite(code)) {
        const truth = await inquiry.inquire(guid);
        const reference = row.status === 'DONE' ? row.response : first;
        if (truth.kind !== 'processed' || (reference !== undefined && reference !== truth.body)) {
          violate(`${guid}: the account system's answer ${truth.kind === 'processed' ? truth.body : truth.kind} is not the one replayed (${String(reference)})`);
        }
      }
    }
    const integrity = ops.db.pragma('integrity_check', { simple: true });
    if (integrity !== 'ok') violate(`integrity_check: ${String(integrity)}`);
    await checkpoint('at the end');
  } finally {
    await drain().catch(() => undefined);
    await Promise.allSettled(refusals);
    while (restarting !== null) await (restarting as Promise<void>).catch(() => undefined);
    if (current !== null) kill(current);
    for (const inc of graveyard) {
      await inc.store.close().catch(() => undefined);
      await inc.client.close().catch(() => undefined);
      await inc.app.close().catch(() => undefined);
    }
    await Promise.allSettled([inquiry.close(), reprocessRaw.close(), healReprocessRaw?.close()]);
    await ops.close().catch(() => undefined);
    await sim.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${db}${suffix}`, { force: true });
    opts.onTrace?.(trace);
  }
  return { actions: actionCount(sc), sends, replies, crashes, healRounds, breakerRefusals, stalls, ms: Date.now() - started };
}

