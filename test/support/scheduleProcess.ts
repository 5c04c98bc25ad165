/**
 * The smaller, real-process variant of the schedules: two `bin/guidgate serve` processes on ONE ledger, a SQLite
 * file or a PostgreSQL database (channels send to either, so claims race across processes), SIGKILL at random points, `guidgate resolve`,
 * `reprocess` and `purge` as real processes, the simulator in this process (faults and stats at hand), every
 * hop a real loopback socket and the real clock. The same oracle (test/support/model.ts) judges every reply.
 *
 * The ledger is read through the store contract (test/support/storeReader.ts), so one harness serves both stores.
 * The relays and the ledger live for a whole property run; each schedule uses its own GUIDs (`P<run>-<i>`), so a
 * schedule's checks cover its GUIDs while the log-wide ones (projection, transitions, integrity) cover all.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { Agent, request } from 'undici';
import type { EventStore } from '../../src/events/store.js';
import { openStore } from '../../src/store/openStore.js';
import { isPostgresUrl } from '../../src/store/postgres/postgresStore.js';
import { parsePostgresUrl } from '../../src/store/postgres/postgresUrl.js';
import { createAccountClient } from '../../src/account/accountClient.js';
import { resolveUnknown } from '../../src/commands/resolve.js';
import { reprocessFailed } from '../../src/commands/reprocess.js';
import { startSimulator, type FaultMode, type Simulator } from '../../src/simulator/index.js';
import { REPO_ROOT } from './children.js';
import {
  channelRequest,
  foldStream,
  healthyCode,
  isDefinite,
  judgeReply,
  replyCode,
  statesAfter,
  type Kind,
  type Variant,
} from './model.js';
import { startHoldingProxy, type HoldingProxy } from './pgHoldingProxy.js';
import { storeLedgerReader, type StoreLedgerReader } from './storeReader.js';
import { InvariantViolation, onChannel, releaseRound, SentBook, simulatorStep, sleep, type Releaser, type Round, type ScheduleBase } from './schedule.js';
import { orThrow } from '../../src/events/storeResult.js';

export const BIN = join(REPO_ROOT, 'bin', 'guidgate');

/**
 * The relays' settings (fixed: every process must agree, as in production). The grace leaves a claim 500 ms (its
 * send window) to commit on a loaded 2-core machine, where an E503 is a failure of the oracle unless a relay was
 * stalled (`freeze`, `delay-ack`).
 */
export const RELAY = { timeoutMs: 300, graceMs: 1000, maxAttempts: 3 } as const;
/** The simulator's answer latency and how long its inquiry still says 404 after applying. */
const SIM = { latencyMs: 20, processingMs: 400, lateMs: 700 } as const;
/**
 * Longer than the account system can take to process a request (latency + processing), with room. The
 * processing time is longer than the relay's timeout on purpose: a `resolve` that ignored `--min-age` would
 * hear 404 about a transfer the account system did apply (the min-age trap).
 */
export const MIN_AGE_MS = 800;

export type PAction =
  | { readonly do: 'send'; readonly ch: number; readonly relay: 0 | 1; readonly g: number; readonly v: Variant }
  | { readonly do: 'fault'; readonly g: number; readonly mode: FaultMode }
  | { readonly do: 'refuse'; readonly ms: number }
  | { readonly do: 'kill'; readonly relay: 0 | 1; readonly downMs: number }
  /** SIGSTOP relay i for `ms`, then SIGCONT: a GC pause, a frozen VM; the other relay and the commands go on. */
  | { readonly do: 'freeze'; readonly relay: 0 | 1; readonly ms: number }
  /**
   * PostgreSQL only: relay 1 reaches the database through a proxy, which holds the acknowledgement of its next COMMIT
   * of one of this schedule's GUIDs for `ms` (the COMMIT itself reaches the server). On SQLite it does nothing.
   */
  | { readonly do: 'delay-ack'; readonly ms: number }
  | { readonly do: 'resolve' }
  | { readonly do: 'reprocess'; readonly maxAttempts: number }
  | { readonly do: 'purge'; readonly retention: '0ms' | '2s' }
  | { readonly do: 'pause'; readonly ms: number };

export type PRound = Round<PAction>;
export type PSchedule = ScheduleBase<PAction>;

const MODES: readonly FaultMode[] = ['late-answer', 'reset', 'hold', 'garbage', 'e500'];
const modeArb = fc.oneof({ weight: 4, arbitrary: fc.constant<FaultMode>('answer') }, { weight: 5, arbitrary: fc.constantFrom<FaultMode>(...MODES) });

export function pScheduleArb(): fc.Arbitrary<PSchedule> {
  return fc
    .record({ guids: fc.integer({ min: 1, max: 4 }), channels: fc.integer({ min: 1, max: 3 }) })
    .chain(({ guids, channels }) => {
      const g = fc.nat(guids - 1);
      const action: fc.Arbitrary<PAction> = fc.oneof(
        { weight: 12, arbitrary: fc.record({ do: fc.constant('send' as const), ch: fc.nat(channels - 1), relay: fc.constantFrom<0 | 1>(0, 1), g, v: fc.constantFrom<Variant>('base', 'base', 'cosmetic', 'header', 'changed') }) },
        { weight: 3, arbitrary: fc.record({ do: fc.constant('fault' as const), g, mode: modeArb }) },
        { weight: 1, arbitrary: fc.record({ do: fc.constant('refuse' as const), ms: fc.constantFrom(100, 400) }) },
        { weight: 2, arbitrary: fc.record({ do: fc.constant('kill' as const), relay: fc.constantFrom<0 | 1>(0, 1), downMs: fc.constantFrom(0, 300) }) },
        // Long enough, at 2.5 s, for the other relay to sweep (timeout + grace), settle (min-age) and resend what the
        // stalled one had claimed. (A SIGSTOP that lands in the microseconds between the send window's check and the
        // request leaving, for longer than half the grace, is the one stall the window cannot cover; README.)
        { weight: 1, arbitrary: fc.record({ do: fc.constant('freeze' as const), relay: fc.constantFrom<0 | 1>(0, 1), ms: fc.constantFrom(150, 2500) }) },
        { weight: 1, arbitrary: fc.record({ do: fc.constant('delay-ack' as const), ms: fc.constantFrom(150, 2500) }) },
        { weight: 1, arbitrary: fc.record({ do: fc.constant('resolve' as const) }) },
        { weight: 1, arbitrary: fc.record({ do: fc.constant('reprocess' as const), maxAttempts: fc.constantFrom(2, 4) }) },
        { weight: 1, arbitrary: fc.record({ do: fc.constant('purge' as const), retention: fc.constantFrom<'0ms' | '2s'>('0ms', '2s') }) },
        { weight: 2, arbitrary: fc.record({ do: fc.constant('pause' as const), ms: fc.constantFrom(50, 350) }) },
      );
      return fc.record({
        kinds: fc.array(fc.constantFrom<Kind>('ok', 'ok', 'ok', 'insufficient', 'unknown-account'), { minLength: guids, maxLength: guids }),
        channels: fc.constant(channels),
        patienceMs: fc.constantFrom(50, 150, 2000),
        faults: fc.array(modeArb, { minLength: guids, maxLength: guids }),
        e500Rate: fc.constantFrom(0, 0, 0.2),
        rounds: fc.array(
          fc.record({
            actions: fc.array(action, { minLength: 1, maxLength: 6 }),
            gapsMs: fc.array(fc.constantFrom(0, 0, 5, 30, 100), { maxLength: 6 }),
            settle: fc.boolean(),
          }),
          { minLength: 1, maxLength: 4 },
        ),
      });
    });
}

export const pActionCount = (sc: PSchedule): number => sc.rounds.reduce((n, r) => n + r.actions.length, 0);

function describe(a: PAction): string {
  switch (a.do) {
    case 'send': return `send ch${a.ch} → relay ${a.relay} G${a.g} ${a.v}`;
    case 'fault': return `fault G${a.g} ${a.mode}`;
    case 'refuse': return `refuse ${a.ms}ms`;
    case 'kill': return `SIGKILL relay ${a.relay} (down ${a.downMs}ms)`;
    case 'freeze': return `SIGSTOP relay ${a.relay} for ${a.ms}ms`;
    case 'delay-ack': return `relay 1's next COMMIT acknowledged ${a.ms}ms late (PostgreSQL)`;
    case 'resolve': return `guidgate resolve --min-age ${MIN_AGE_MS}ms`;
    case 'reprocess': return `guidgate reprocess --max-attempts ${a.maxAttempts} --min-age ${MIN_AGE_MS}ms`;
    case 'purge': return `guidgate purge --retention ${a.retention}`;
    case 'pause': return `pause ${a.ms}ms`;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Processes

/** Every child `spawnServe` and `guidgate` started that has not exited yet. */
const live = new Set<ChildProcess>();

function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/**
 * SIGKILLs every child `spawnServe` and `guidgate` started that is still running and waits until each is gone;
 * for `afterAll`, which runs even when the test failed or timed out with children mid-flight. Returns how many.
 */
export async function killChildren(): Promise<number> {
  const running = [...live];
  await Promise.all(
    running.map(
      (child) =>
        new Promise<void>((gone) => {
          if (child.exitCode !== null || child.signalCode !== null) return gone();
          child.once('exit', () => gone());
          child.kill('SIGKILL');
        }),
    ),
  );
  return running.length;
}

export interface ServeProcess {
  readonly child: ChildProcess;
  readonly url: string;
  readonly exited: Promise<number | null>;
}

/** `node bin/guidgate serve --port 0 …`; resolves once it printed `listening on http://…`. */
export function spawnServe(args: readonly string[], env: Record<string, string> = {}): Promise<ServeProcess> {
  const child = track(spawn(process.execPath, [BIN, 'serve', '--port', '0', '--log-level', 'error', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } }));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not print "listening on" within 20 s: ${out} ${err}`)), 20_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1]!, exited });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited ${code} before listening: ${out} ${err}`));
    });
  });
}

export async function sigkill(p: ServeProcess): Promise<void> {
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await p.exited;
}

/** Runs `node bin/guidgate ARGS` to the end. */
export function guidgate(args: readonly string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = track(spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } }));
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The first JSON object a command printed (its `--json` summary). */
export function jsonSummary(stdout: string): Record<string, unknown> | null {
  const start = stdout.indexOf('{');
  if (start < 0) return null;
  try {
    return JSON.parse(stdout.slice(start)) as Record<string, unknown>;
  } catch {
    return null;
  }
}

export interface ChannelReply {
  readonly status: number;
  readonly body: string;
  readonly replayed: boolean;
}

/** One channel POST over real HTTP; null when the connection failed (refused, reset by a kill). */
export async function post(dispatcher: Agent, url: string, body: string, headers: Record<string, string>): Promise<ChannelReply | null> {
  try {
    const res = await request(`${url}/v1/transfers`, { dispatcher, method: 'POST', body, headers: { 'content-type': 'application/json', ...headers }, headersTimeout: 10_000, bodyTimeout: 10_000 });
    const text = await res.body.text();
    return { status: res.statusCode, body: text, replayed: res.headers['idempotent-replayed'] === 'true' };
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------------------
// The world a property run shares: simulator, ledger file, two relays

export class ProcessWorld {
  readonly relays: Array<ServeProcess | null> = [null, null];
  private readonly restarting: Array<Promise<void> | null> = [null, null];
  readonly dispatcher = new Agent({ pipelining: 1, connections: 16, keepAliveTimeout: 1000 });
  kills = 0;
  /** When a relay was frozen or had a COMMIT acknowledgement held (`to` Infinity while it lasts). */
  private readonly stalls: Array<{ relay: 0 | 1; kind: 'freeze' | 'delay-ack'; from: number; to: number }> = [];

  /**
   * Whether relay `relay`'s ledger was stalled at any time between `from` and `to` (Date.now() values): its own freeze
   * or held acknowledgement, or the other relay's freeze, since a relay stopped inside its write transaction holds the
   * SQLite write lock, or its rows' locks on PostgreSQL, from the other too. The other's held acknowledgement is no
   * excuse: the server has committed and let go of its locks, only that relay has not heard so.
   */
  stalledDuring(relay: 0 | 1, from: number, to: number): boolean {
    return this.stalls.some((st) => (st.relay === relay || st.kind === 'freeze') && st.from <= to && st.to >= from);
  }

  private async stalling<T>(relay: 0 | 1, kind: 'freeze' | 'delay-ack', work: () => Promise<T>): Promise<T> {
    const stall = { relay, kind, from: Date.now(), to: Number.POSITIVE_INFINITY };
    this.stalls.push(stall);
    try {
      return await work();
    } finally {
      stall.to = Date.now();
    }
  }

  private constructor(
    readonly sim: Simulator,
    readonly db: string,
    readonly reader: StoreLedgerReader,
    readonly ops: EventStore,
    /** PostgreSQL: relay 1's way to the database, which can hold a COMMIT's acknowledgement (`delay-ack`). */
    readonly proxy: HoldingProxy | null,
  ) {}

  /** `db`: a SQLite file path or a PostgreSQL URL, as `--db` takes it. */
  static async start(db: string): Promise<ProcessWorld> {
    const sim = await startSimulator({ port: 0, latencyMs: SIM.latencyMs, faults: { processingMs: SIM.processingMs, lateMs: SIM.lateMs } });
    // The schema first, so the relays race on claims, not on creating the ledger.
    const ops = await openStore(db);
    // A multi-host URL (CONTRACT.md §9): the proxy stands in front of its last host, the one that takes writes.
    const primary = isPostgresUrl(db) ? parsePostgresUrl(db).hosts.at(-1)! : null;
    const proxy = primary === null ? null : await startHoldingProxy({ host: primary.host, port: primary.port });
    const w = new ProcessWorld(sim, db, storeLedgerReader(ops), ops, proxy);
    await Promise.all([w.restart(0, 0), w.restart(1, 0)]);
    return w;
  }

  /** SQLite's full integrity check of the file (null: ok); a PostgreSQL ledger is the server's to check. */
  private integrity(): string | null {
    if (isPostgresUrl(this.db)) return null;
    const raw = new Database(this.db, { readonly: true });
    try {
      raw.pragma('busy_timeout = 5000');
      const result = String(raw.pragma('integrity_check', { simple: true }));
      return result === 'ok' ? null : result;
    } finally {
      raw.close();
    }
  }

  serveArgs(i: 0 | 1): string[] {
    const db = i === 1 && this.proxy !== null ? throughProxy(this.proxy, this.db) : this.db;
    return ['--db', db, '--account-url', this.sim.url, '--timeout', `${RELAY.timeoutMs}ms`, '--grace', `${RELAY.graceMs}ms`, '--max-attempts', String(RELAY.maxAttempts), '--min-age', `${MIN_AGE_MS}ms`,
      // Both relays settle in the background, and each has a breaker that trips after 3 failed or unknown calls.
      '--settle-every', '200ms', '--breaker-failures', '3', '--breaker-cooldown', '300ms'];
  }

  restart(i: 0 | 1, downMs: number): Promise<void> {
    const p = (async () => {
      await sleep(downMs);
      this.relays[i] = await spawnServe(this.serveArgs(i));
    })();
    this.restarting[i] = p;
    return p.finally(() => {
      if (this.restarting[i] === p) this.restarting[i] = null;
    });
  }

  /** SIGKILL relay i and start it again after `downMs`; nothing if it is already down. */
  async kill(i: 0 | 1, downMs: number): Promise<boolean> {
    const p = this.relays[i];
    if (p === null || p === undefined || this.restarting[i] !== null) return false;
    this.relays[i] = null;
    this.kills++;
    await sigkill(p);
    await this.restart(i, downMs);
    return true;
  }

  /** SIGSTOP relay i for `ms`, then SIGCONT; nothing if it is down or restarting. */
  async freeze(i: 0 | 1, ms: number): Promise<boolean> {
    const p = this.relays[i];
    if (p === null || p === undefined || this.restarting[i] !== null || p.child.exitCode !== null) return false;
    await this.stalling(i, 'freeze', async () => {
      p.child.kill('SIGSTOP');
      try {
        await sleep(ms);
      } finally {
        p.child.kill('SIGCONT');
      }
    });
    return true;
  }

  /** Holds relay 1's next COMMIT acknowledgement of a transaction naming `marker` for `ms`; false on SQLite. */
  async delayAck(marker: string, ms: number): Promise<boolean> {
    if (this.proxy === null) return false;
    const hold = this.proxy.arm(marker);
    await this.stalling(1, 'delay-ack', async () => {
      try {
        await sleep(ms);
      } finally {
        hold.release();
      }
    });
    return true;
  }

  async bothUp(): Promise<void> {
    for (const i of [0, 1] as const) {
      while (this.restarting[i] !== null) await this.restarting[i];
      if (this.relays[i] === null) await this.restart(i, 0);
    }
  }

  /** Log-wide checks over every schedule of the run: at most once, transitions, ledger = rebuild, integrity. */
  async verifyAll(): Promise<string[]> {
    const problems: string[] = [];
    const stats = this.sim.stats();
    if (stats.doubleApplied.length > 0) problems.push(`applied more than once: ${stats.doubleApplied.join(', ')}`);
    for (const [g, events] of await this.reader.allEvents()) {
      for (const i of foldStream(events).illegal) problems.push(`${g}: illegal transition: ${i}`);
      const sents = events.filter((e) => e.type === 'Sent').length;
      if ((stats.calls[g] ?? 0) > sents) problems.push(`${g}: ${stats.calls[g]} calls, ${sents} Sent`);
    }
    const diffs = await orThrow(this.ops.verifyProjection());
    if (diffs.length > 0) problems.push(`verifyProjection: ${JSON.stringify(diffs).slice(0, 400)}`);
    const integrity = this.integrity();
    if (integrity !== null) problems.push(`integrity_check: ${integrity}`);
    return problems;
  }

  async close(): Promise<void> {
    await this.bothUp().catch(() => undefined);
    for (const p of this.relays) if (p) await sigkill(p);
    await this.proxy?.close();
    await this.dispatcher.close();
    await this.ops.close();
    await this.sim.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// One schedule

export interface PRunResult {
  readonly actions: number;
  readonly sends: number;
  readonly replies: Record<string, number>;
  readonly kills: number;
  /** Freezes and held COMMIT acknowledgements that took place. */
  readonly stalls: number;
  readonly healRounds: number;
  readonly ms: number;
}

export async function runProcessSchedule(sc: PSchedule, s: Releaser, w: ProcessWorld, runId: number): Promise<PRunResult> {
  const started = Date.now();
  const guids = sc.kinds.map((_, i) => `P${runId}-${i}`);
  const trace: string[] = [];
  const violations: string[] = [];
  const log = (line: string) => trace.push(`${String(Date.now() - started).padStart(5)}ms  ${line}`);
  const violate = (line: string) => {
    violations.push(line);
    log(`VIOLATION ${line}`);
  };
  const { sim, reader } = w;
  const env = { GUIDGATE_DB: w.db, GUIDGATE_ACCOUNT_URL: sim.url };
  const killsBefore = w.kills;
  let stalls = 0;

  const faultMap: Record<string, FaultMode> = {};
  sc.faults.forEach((m, i) => {
    if (m !== 'answer') faultMap[guids[i]!] = m;
  });
  sim.setFaults({ byGuid: { ...faultMap }, e500Rate: sc.e500Rate, seed: runId + 1, processingMs: SIM.processingMs, lateMs: SIM.lateMs });

  const inflight = new Set<Promise<unknown>>();
  const track = (p: Promise<unknown>) => {
    inflight.add(p);
    void p.finally(() => inflight.delete(p)).catch(() => undefined);
  };
  const drain = async () => {
    while (inflight.size > 0) await Promise.allSettled([...inflight]);
  };
  const refusals: Promise<void>[] = [];

  const book = new SentBook(guids, sc.kinds);
  const sentVariants = book.variants;
  const firstDefinite = new Map<string, string>();
  const lastReply = new Map<string, string>();
  const replies: Record<string, number> = {};
  let sends = 0;
  const fp = (g: number, v: Variant) => book.fingerprintOf(g, v);
  const classOf = (g: number, f: string) => book.classOf(g, f);

  const send = async (g: number, v: Variant, relay: 0 | 1, label: string): Promise<void> => {
    const guid = guids[g]!;
    const req = channelRequest(guid, sc.kinds[g]!, v, g);
    sends++;
    book.note(guid, v);
    const target = w.relays[relay];
    if (target === null || target === undefined) {
      log(`${label}: relay ${relay} is down`);
      return;
    }
    const before = await reader.row(guid);
    const sentAt = Date.now();
    const r = await post(w.dispatcher, target.url, req.body, req.headers);
    if (r === null) {
      log(`${label}: connection failed (relay ${relay} killed?)`);
      return;
    }
    const { code } = replyCode(r);
    replies[code] = (replies[code] ?? 0) + 1;
    const after = await reader.row(guid);
    const between = statesAfter(before, await reader.events(guid, before?.lastSeq ?? -1));
    for (const i of between.illegal) violate(`${guid}: illegal transition: ${i}`);
    log(`${label} → ${code} ${r.status}${r.replayed ? ' replayed' : ''}; states ${between.states.map((st) => `${st.status}#${st.lastSeq}`).join('→')}`);
    lastReply.set(`${guid}/${v}`, code);
    if (after !== null && classOf(g, after.fingerprint) === null) violate(`${guid}: ledger fingerprint is not the contract fingerprint of anything sent`);
    const ledgerStalled = w.stalledDuring(relay, sentAt, Date.now());
    for (const why of judgeReply(r, { requestFingerprint: req.fingerprint, rowFingerprint: after?.fingerprint ?? null, states: between.states, absentBefore: before === null, maxAttempts: RELAY.maxAttempts, firstDefinite: firstDefinite.get(guid), ledgerStalled })) {
      violate(`${guid} ${v}: ${why}`);
    }
    if (isDefinite(code)) {
      const first = firstDefinite.get(guid);
      if (first === undefined) firstDefinite.set(guid, r.body);
      else if (first !== r.body) violate(`${guid}: definite answers differ:\n  first ${first}\n  now   ${r.body}`);
    }
  };

  const cli = async (args: string[], label: string): Promise<void> => {
    const r = await guidgate([...args, '--json'], env);
    const summary = jsonSummary(r.stdout);
    log(`${label}: exit ${r.code} ${summary === null ? r.stdout.slice(0, 200) : JSON.stringify(summary)}`);
    if (r.code !== 0 && r.code !== 1) violate(`${label} exited ${r.code}: ${r.stderr.slice(0, 300)}`);
    if (summary !== null && typeof summary['ledgerErrors'] === 'number' && summary['ledgerErrors'] > 0) violate(`${label}: ledger errors on a healthy ledger: ${r.stderr.slice(0, 300)}`);
  };

  const channelBusy: Array<Promise<unknown>> = Array.from({ length: sc.channels }, () => Promise.resolve());
  const launch = (a: PAction, label: string) => {
    const run = async (): Promise<void> => {
      switch (a.do) {
        case 'send':
          return onChannel(channelBusy, a.ch, sc.patienceMs, () => send(a.g, a.v, a.relay, label));
        case 'fault':
        case 'refuse':
          simulatorStep(sim, faultMap, refusals, guids, a);
          log(label);
          return;
        case 'kill':
          if (await w.kill(a.relay, a.downMs)) log(`${label}: restarted`);
          return;
        case 'freeze':
          if (await w.freeze(a.relay, a.ms)) {
            stalls++;
            log(`${label}: running again`);
          }
          return;
        case 'delay-ack':
          // This schedule's GUIDs all start with P<run>-: the next COMMIT of relay 1 about one of them is held.
          if (await w.delayAck(`P${runId}-`, a.ms)) {
            stalls++;
            log(`${label}: released`);
          }
          return;
        case 'resolve':
          return cli(['resolve', '--min-age', `${MIN_AGE_MS}ms`, '--grace', `${RELAY.graceMs}ms`], label);
        case 'reprocess':
          return cli(['reprocess', '--max-attempts', String(a.maxAttempts), '--timeout', `${RELAY.timeoutMs}ms`, '--grace', `${RELAY.graceMs}ms`, '--min-age', `${MIN_AGE_MS}ms`], label);
        case 'purge':
          return cli(['purge', '--retention', a.retention, '--tombstone-retention', '3650d'], label);
        case 'pause':
          return sleep(a.ms);
      }
    };
    track(run().catch((err: unknown) => violate(`${label} threw: ${err instanceof Error ? err.message : String(err)}`)));
  };

  /** Per GUID at the previous checkpoint: an UNKNOWN row's state and how many calls the account system had seen. */
  let previous = new Map<string, { lastSeq: number; calls: number; settledAt: number }>();
  const checkpoint = async (where: string): Promise<void> => {
    const stats = sim.stats();
    const wall = Date.now();
    const doubled = stats.doubleApplied.filter((g) => guids.includes(g));
    if (doubled.length > 0) violate(`${where}: applied more than once: ${doubled.join(', ')}`);
    const snap = await reader.snapshot();
    const all = snap.events;
    const rows = new Map(snap.rows.map((r) => [r.guid, r]));
    const next = new Map<string, { lastSeq: number; calls: number; settledAt: number }>();
    for (const [g, events] of all) {
      // This schedule's GUIDs only: a shrunk counter-example must not fail on what an earlier run left.
      if (!guids.includes(g)) continue;
      const folded = foldStream(events);
      for (const i of folded.illegal) violate(`${where}: ${g}: illegal transition: ${i}`);
      const row = rows.get(g);
      const st = folded.state;
      if (row === undefined || st === null || row.status !== st.status || row.attempts !== st.attempts || row.lastSeq !== st.lastSeq) {
        violate(`${where}: ${g}: ledger row is not the fold of its log`);
      }
      // Every call the account system saw had its own Sent in the log before it.
      const sents = events.filter((e) => e.type === 'Sent').length;
      const calls = stats.calls[g] ?? 0;
      if (calls > sents) violate(`${where}: ${g}: the account system saw ${calls} calls, the log has ${sents} Sent`);
      // An UNKNOWN row is never sent again: its calls do not grow while it stays UNKNOWN.
      if (row?.status === 'UNKNOWN') {
        const p = previous.get(g);
        if (p !== undefined && p.lastSeq === row.lastSeq && p.settledAt && calls !== p.calls) violate(`${where}: ${g} stayed UNKNOWN (#${row.lastSeq}) while its calls went ${p.calls} → ${calls}`);
        // Only a row UNKNOWN for a while is certain to have no request of its last attempt still on the wire.
        next.set(g, { lastSeq: row.lastSeq, calls, settledAt: wall - row.updatedAt > 200 ? wall : 0 });
      }
    }
    previous = next;
    const diffs = (await orThrow(w.ops.verifyProjection())).filter((d) => guids.includes(d.guid));
    if (diffs.length > 0) violate(`${where}: verifyProjection: ${JSON.stringify(diffs).slice(0, 400)}`);
    if (violations.length > 0) {
      throw new InvariantViolation(`${violations.length} violation(s) ${where}:\n- ${violations.slice(0, 8).join('\n- ')}\n\ntrace:\n${trace.slice(-80).join('\n')}`);
    }
  };

  let healRounds = 0;
  try {
    for (const [ri, round] of sc.rounds.entries()) {
      await releaseRound(s, round, ri, describe, launch);
      if (round.settle) await drain();
      await checkpoint(`after round ${ri}`);
    }

    // ---- healing ----
    await drain();
    await Promise.all(refusals);
    sim.setFaults({ byGuid: {}, byGuidPrefix: {}, e500Rate: 0, mode: 'answer' });
    await w.bothUp();
    log('heal: faults off, both relays up');
    const sentGuids = guids.filter((g) => sentVariants.has(g));
    let healed = false;
    // The first round runs at once: resolve must leave every row younger than --min-age alone by itself.
    // The healing operator runs resolve and reprocess as library calls on their own connection (another
    // writer of the file, as a process would be): the schedule above already ran them as processes.
    const inquiry = createAccountClient({ baseUrl: sim.url, timeoutMs: 3000 });
    const resender = createAccountClient({ baseUrl: sim.url, timeoutMs: 3000 });
    try {
      for (let round = 0; round < 8 && !healed; round++) {
        healRounds++;
        const rs = await resolveUnknown({ store: w.ops, account: inquiry }, { minAgeMs: MIN_AGE_MS, graceMs: RELAY.graceMs });
        log(`heal ${round} resolve: ${JSON.stringify(rs)}`);
        const rp = await reprocessFailed({ store: w.ops, account: resender }, { maxAttempts: 100, timeoutMs: 3000, graceMs: RELAY.graceMs, minAgeMs: MIN_AGE_MS });
        log(`heal ${round} reprocess: ${JSON.stringify(rp)}`);
        if (rs.ledgerErrors + rp.ledgerErrors > 0) violate(`heal ${round}: ledger errors on a healthy ledger`);
        await Promise.all(
          sentGuids.map(async (guid, k) => {
            const g = guids.indexOf(guid);
            for (const v of sentVariants.get(guid)!) await send(g, v, ((k + round) % 2) as 0 | 1, `heal ${round} resend ${guid} ${v}`);
          }),
        );
        await checkpoint(`after heal round ${round}`);
        const rowsNow = new Map((await reader.rows()).map((r) => [r.guid, r]));
        const open = sentGuids.filter((guid) => {
          const row = rowsNow.get(guid) ?? null;
          if (row === null || (row.status !== 'DONE' && row.status !== 'PURGED')) return true;
          const g = guids.indexOf(guid);
          const claimer = classOf(g, row.fingerprint);
          return [...sentVariants.get(guid)!].some((v) => {
            const code = lastReply.get(`${guid}/${v}`);
            const same = claimer !== null && fp(g, v) === fp(g, claimer);
            return code === undefined || (same ? !(isDefinite(code) || code === 'E905') : code !== 'E904');
          });
        });
        healed = open.length === 0;
        if (!healed) {
          log(`heal ${round}: open ${open.map((g) => `${g}:${rowsNow.get(g)?.status ?? '-'}`).join(' ')}`);
          // Not healed yet: wait past the orphan deadline of every SENT row and the min-age of every UNKNOWN one of this schedule.
          const due = (await reader.rows())
            .filter((r) => guids.includes(r.guid))
            .map((r) => (r.status === 'SENT' || r.status === 'RECEIVED' ? (r.sentAt ?? r.updatedAt) + RELAY.timeoutMs + RELAY.graceMs + 50 : r.status === 'UNKNOWN' ? (r.sentAt ?? r.updatedAt) + MIN_AGE_MS + 20 : 0));
          const wait = Math.max(0, ...due) - Date.now();
          if (wait > 0) await sleep(Math.min(wait, 2000));
        }
      }
    } finally {
      await inquiry.close();
      await resender.close();
    }
    if (!healed) violate('healing did not converge');

    const stats = sim.stats();
    for (const [g, guid] of guids.entries()) {
      const row = await reader.row(guid);
      const applied = stats.applied[guid] ?? 0;
      if (!sentVariants.has(guid)) continue;
      if (row === null) {
        violate(`${guid} was sent but has no ledger row`);
        continue;
      }
      if (row.status !== 'DONE' && row.status !== 'PURGED') violate(`${guid} ended ${row.status}`);
      const code = row.code ?? '(none)';
      if (code === '0000') {
        if (applied !== 1) violate(`${guid} DONE 0000 but applied ${applied} times`);
      } else if (code === 'E500') {
        if (applied !== 0) violate(`${guid} E500 but applied ${applied} times`);
      } else if (code !== healthyCode(sc.kinds[g]!) || applied !== 0) violate(`${guid} (${sc.kinds[g]}) ended ${code}, applied ${applied}`);
      const first = firstDefinite.get(guid);
      if (row.status === 'DONE' && first !== undefined && row.response !== first) violate(`${guid}: the ledger's answer is not the first answer the channels got`);
    }
    await checkpoint('at the end');
  } finally {
    await drain();
    await Promise.allSettled(refusals);
  }
  return { actions: pActionCount(sc), sends, replies, kills: w.kills - killsBefore, stalls, healRounds, ms: Date.now() - started };
}

/** `db` with its last host (the primary) replaced by the proxy's address; the other hosts of a multi-host URL kept. */
function throughProxy(proxy: HoldingProxy, db: string): string {
  const { hosts } = parsePostgresUrl(db);
  const last = hosts.at(-1)!;
  const proxied = parsePostgresUrl(proxy.through(last.url)).hosts[0]!;
  const at = db.lastIndexOf(last.label);
  return `${db.slice(0, at)}${proxied.label}${db.slice(at + last.label.length)}`;
}
