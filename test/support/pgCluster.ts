/**
 * Real PostgreSQL clusters of a test's own, for failover tests (issue #26): a pg_auto_failover formation (a
 * monitor, a primary and a synchronous secondary) and a primary with an asynchronous streaming standby. Every
 * server runs as the `postgres` user (PostgreSQL refuses root) on free loopback ports with trust auth and no SSL,
 * its data in a temp folder of its own; `stop()` ends every process the cluster started, by PID, and removes the
 * folder. A process that exits without `stop()` (a test runner killed mid-test) still SIGKILLs them on its way out.
 *
 * No vitest here: benchmarks (bench/pgDriverFailover.ts) start clusters too.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { waitFor } from './waitFor.js';

export const PG_BIN = '/usr/lib/postgresql/15/bin';
export const PG_AUTOCTL = '/usr/bin/pg_autoctl';

/** Why these clusters cannot run here (a missing program), or null. */
export function clusterToolsMissing(): string | null {
  const missing = [`${PG_BIN}/initdb`, `${PG_BIN}/postgres`, `${PG_BIN}/pg_ctl`, `${PG_BIN}/pg_basebackup`, PG_AUTOCTL].filter((p) => !existsSync(p));
  return missing.length === 0 ? null : `${missing.join(', ')} not found`;
}

/**
 * Whether the cluster tests can run here. Under CI (`CI=true`) a missing program is a failure, never a skip;
 * elsewhere the tests are skipped with a message that says what to install (as test/support/pg.ts does for the server).
 */
export function clustersForTests(): { available: boolean } {
  const why = clusterToolsMissing();
  if (why === null) return { available: true };
  if (process.env['CI'] === 'true') throw new Error(`PostgreSQL cluster tests: ${why}; CI needs them: apt-get install postgresql-15 postgresql-15-auto-failover`);
  console.warn(`PostgreSQL cluster tests skipped: ${why}. To run them: apt-get install postgresql-15 postgresql-15-auto-failover`);
  return { available: false };
}

// ---------------------------------------------------------------------------------------------------------------
// Processes as the postgres user, tracked by PID

/** The uid/gid servers run as: the `postgres` user when this process is root, else this process's own user. */
function serverUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The PIDs whose parent is `pid` (from /proc), e.g. a postmaster's backends before the postmaster is killed. */
function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/**
 * When `pid` started (clock ticks after boot, /proc/PID/stat field 22), '' when it is gone: with the PID it names
 * one process, so a PID the kernel has given to another process since is never signalled.
 */
function startTime(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
  } catch {
    return '';
  }
}

/** The postmaster's PID as its data folder records it, or null (not running, or not yet). */
function postmasterPid(dataDir: string): number | null {
  try {
    const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 && alive(pid) ? pid : null;
  } catch {
    return null;
  }
}

const workspaces = new Set<Workspace>();
let exitHookInstalled = false;

/**
 * One cluster's temp folder and every process started in it. Services are spawned detached, each the leader of a
 * process group of its own: pg_autoctl signals its whole group when its children do not stop in time
 * (`killpg`), which must never reach the test runner or another node.
 */
class Workspace {
  readonly dir: string;
  private readonly user = serverUser();
  private readonly services: ChildProcess[] = [];
  /** Postmasters and their children seen while running, SIGKILLed at the end if any is still there. */
  private readonly serverPids = new Map<number, string>();
  private readonly dataDirs: string[] = [];
  private stopped = false;

  constructor(tag: string) {
    this.dir = mkdtempSync(join(tmpdir(), `guidgate-${tag}-`));
    if (this.user !== null) chownSync(this.dir, this.user.uid, this.user.gid);
    workspaces.add(this);
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.on('exit', () => {
        for (const w of workspaces) w.killNow();
      });
    }
  }

  /** The environment of every command: pg_autoctl keeps its config, state and PID files in the folder, not in ~postgres. */
  private env(): NodeJS.ProcessEnv {
    const d = this.dir;
    return { HOME: d, XDG_CONFIG_HOME: join(d, 'config'), XDG_DATA_HOME: join(d, 'share'), XDG_RUNTIME_DIR: join(d, 'run'), PATH: `${PG_BIN}:/usr/bin:/bin`, LANG: 'C.UTF-8', PG_COLOR: 'never' };
  }

  private asUser(): { uid?: number; gid?: number } {
    return this.user === null ? {} : { uid: this.user.uid, gid: this.user.gid };
  }

  /** A data folder inside the workspace that a server will use (its postmaster is found there at the end). */
  dataDir(name: string): string {
    const d = join(this.dir, name);
    this.dataDirs.push(d);
    return d;
  }

  /** Runs a command to its end as the server user; rejects with its output when it fails. */
  run(cmd: string, args: readonly string[], timeoutMs = 120_000): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(cmd, args, { env: this.env(), cwd: this.dir, timeout: timeoutMs, encoding: 'utf8', ...this.asUser() }, (err, stdout, stderr) => {
        if (err) reject(new Error(`${cmd.split('/').pop()} ${args.join(' ')} failed: ${err.message}\n${stderr}${stdout}`));
        else resolve(stdout);
      });
    });
  }

  /** Starts a long-running service as the server user, its output appended to `<dir>/<name>.log`. */
  spawnService(name: string, cmd: string, args: readonly string[]): ChildProcess {
    if (this.stopped) throw new Error('the cluster is stopped');
    const log = openSync(join(this.dir, `${name}.log`), 'a');
    if (this.user !== null) chownSync(join(this.dir, `${name}.log`), this.user.uid, this.user.gid);
    try {
      const child = spawn(cmd, args, { env: this.env(), cwd: this.dir, stdio: ['ignore', log, log], detached: true, ...this.asUser() });
      child.on('error', () => undefined);
      this.services.push(child);
      return child;
    } finally {
      closeSync(log);
    }
  }

  /** The last lines of a service's log, for an error message. */
  logTail(name: string, lines = 30): string {
    try {
      return readFileSync(join(this.dir, `${name}.log`), 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /** Remembers a running postmaster and its children, so that the end of the cluster can find them after a crash. */
  noteServer(dataDir: string): number | null {
    const pid = postmasterPid(dataDir);
    if (pid !== null) {
      this.serverPids.set(pid, startTime(pid));
      for (const c of childrenOf(pid)) this.serverPids.set(c, startTime(c));
    }
    return pid;
  }

  /** SIGKILLs a postmaster (a crash), its children noted first for the end of the cluster. */
  crashServer(dataDir: string): number {
    const pid = this.noteServer(dataDir);
    if (pid === null) throw new Error(`no postmaster running in ${dataDir}`);
    process.kill(pid, 'SIGKILL');
    return pid;
  }

  /**
   * Ends everything, fast (the data is thrown away): every service's process group SIGKILLed (pg_autoctl then
   * cannot start its Postgres again; asked nicely, a pg_autoctl whose keeper was already stopped waits for ever),
   * then every postmaster still running in the data folders SIGQUIT (an immediate shutdown that ends its children
   * too), SIGKILL after 5 s; then any process noted earlier that is still there; then the folder.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const d of this.dataDirs) this.noteServer(d);
    const running = this.services.filter((c) => c.exitCode === null && c.signalCode === null && c.pid !== undefined);
    const ended = running.map((c) => new Promise<void>((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once('exit', () => r()))));
    for (const c of running) signal(-c.pid!, 'SIGKILL');
    await Promise.all(ended);
    await Promise.all(
      this.dataDirs.map(async (d) => {
        const pid = postmasterPid(d);
        if (pid === null) return;
        signal(pid, 'SIGQUIT');
        await waitFor(() => !alive(pid), { timeoutMs: 5000, intervalMs: 20, what: `postmaster ${pid} gone` }).catch(() => signal(pid, 'SIGKILL'));
      }),
    );
    this.killNoted();
    rmSync(this.dir, { recursive: true, force: true, maxRetries: 5 });
    workspaces.delete(this);
  }

  /** The process is exiting: no time to wait, every process of the cluster is SIGKILLed and the folder removed. */
  killNow(): void {
    for (const c of this.services) if (c.pid !== undefined && c.exitCode === null && c.signalCode === null) signal(-c.pid, 'SIGKILL');
    for (const d of this.dataDirs) {
      const pid = postmasterPid(d);
      if (pid !== null) signal(pid, 'SIGKILL');
    }
    this.killNoted();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private killNoted(): void {
    for (const [pid, started] of this.serverPids) if (started !== '' && startTime(pid) === started) signal(pid, 'SIGKILL');
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/**
 * `n` distinct loopback ports nothing listens on right now (all held open together, so they differ), chosen at random
 * below the kernel's ephemeral range: a port from `listen(0)` is an ephemeral one, which any outgoing connection of
 * any process may take in the seconds before the postmaster binds it (seen in CI: "could not bind … Address already
 * in use" for a standby whose port was picked before its primary's base backup).
 */
export async function freePorts(n: number): Promise<number[]> {
  const [low] = ephemeralRange();
  const floor = 10_000;
  const servers: Server[] = [];
  try {
    while (servers.length < n) {
      const port = floor + Math.floor(Math.random() * Math.max(1, low - floor));
      const s = createServer();
      const bound = await new Promise<boolean>((r) => {
        s.once('error', () => r(false));
        s.listen(port, '127.0.0.1', () => r(true));
      });
      if (bound) servers.push(s);
    }
    return servers.map((s) => (s.address() as { port: number }).port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  }
}

function ephemeralRange(): [number, number] {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low && high && low > 11_000) return [low, high];
  } catch {
    // not Linux: fall through to the IANA default
  }
  return [49_152, 65_535];
}

// ---------------------------------------------------------------------------------------------------------------
// SQL on one server

/** The URL of one server of a cluster (user postgres, trust on loopback). */
export const serverUrl = (port: number, database = 'postgres'): string => `postgres://postgres@127.0.0.1:${port}/${database}`;

/** Runs `fn` on a connection of its own to one server, closed afterwards. */
export async function onServer<T>(port: number, fn: (client: pg.Client) => Promise<T>, database = 'postgres'): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl(port, database), connectionTimeoutMillis: 2000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Whether a server takes writes as a client with `target_session_attrs=read-write` sees it: not in recovery and
 * not read-only by default (pg_auto_failover makes a standby being promoted read-only until the old primary is
 * presumed dead). False when it cannot be reached.
 */
export async function isWritable(port: number): Promise<boolean> {
  try {
    return await onServer(port, async (c) => {
      const { rows } = await c.query<{ recovery: boolean; ro: string }>("SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS ro");
      return rows[0]!.recovery === false && rows[0]!.ro === 'off';
    });
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// pg_auto_failover: a monitor, a primary and a synchronous secondary

export interface FormationNode {
  readonly name: string;
  readonly port: number;
  readonly dataDir: string;
}

/**
 * How fast the monitor decides a failover. `fast`: what the failover tests use (each failover in a few seconds)
 * and still safe against two writable primaries: the monitor waits `primary_demote_timeout` (4 s) before the
 * promoted standby takes writes, longer than an isolated old primary's keeper waits before it shuts its Postgres
 * down (`network_partition_timeout`, 3 s). `recommended`: docs/deploying.md's recommended settings (the same health
 * checks, unhealthy after 3 s, 6 s demote timeout, keepers' `network_partition_timeout` 5 s). `default`:
 * pg_auto_failover's own settings (health check every 5 s, unhealthy after 20 s, 30 s demote timeout).
 */
export type FailoverTiming = 'fast' | 'recommended' | 'default';

const FAST_MONITOR: Readonly<Record<string, number>> = {
  'pgautofailover.health_check_period': 1000,
  'pgautofailover.health_check_timeout': 1000,
  'pgautofailover.health_check_max_retries': 1,
  'pgautofailover.health_check_retry_delay': 500,
  'pgautofailover.node_considered_unhealthy_timeout': 2000,
  'pgautofailover.primary_demote_timeout': 4000,
  'pgautofailover.startup_grace_period': 1000,
};
const FAST_NETWORK_PARTITION_TIMEOUT_S = 3;
/** docs/deploying.md, "recommended" in the E503 window table. */
const RECOMMENDED_MONITOR: Readonly<Record<string, number>> = {
  'pgautofailover.health_check_period': 1000,
  'pgautofailover.health_check_timeout': 1000,
  'pgautofailover.health_check_max_retries': 1,
  'pgautofailover.health_check_retry_delay': 500,
  'pgautofailover.node_considered_unhealthy_timeout': 3000,
  'pgautofailover.primary_demote_timeout': 6000,
};
const RECOMMENDED_NETWORK_PARTITION_TIMEOUT_S = 5;
const MONITOR_SETTINGS: Readonly<Record<FailoverTiming, Readonly<Record<string, number>>>> = { fast: FAST_MONITOR, recommended: RECOMMENDED_MONITOR, default: {} };
const NETWORK_PARTITION_TIMEOUT_S: Readonly<Record<FailoverTiming, number | null>> = { fast: FAST_NETWORK_PARTITION_TIMEOUT_S, recommended: RECOMMENDED_NETWORK_PARTITION_TIMEOUT_S, default: null };

/** The recipe's database (`pg_autoctl create postgres --dbname`) and guidgate's role in it. */
export const FORMATION_DB = 'guidgate';
export const FORMATION_ROLE = 'guidgate';

export interface AutoFailoverFormation {
  /** `pg_autoctl show uri --formation default`, as printed: `postgres://127.0.0.1:p1,127.0.0.1:p2/guidgate?target_session_attrs=read-write&sslmode=require`. */
  readonly uri: string;
  /** The same URL with the user `guidgate` added (no user in the URI: a client would log in as root), the rest as printed. */
  readonly url: string;
  readonly monitorPort: number;
  readonly nodes: readonly FormationNode[];
  /** Milliseconds from the start until the monitor saw a primary and a secondary with synchronous replication on. */
  readonly readyMs: number;
  /** The node that takes writes now (as `target_session_attrs=read-write` sees it), or null while none does. */
  primary(): Promise<FormationNode | null>;
  /** The monitor's view: each node's reported and assigned state. */
  states(): Promise<Array<{ name: string; reported: string; assigned: string }>>;
  /** The monitor's event log (`pgautofailover.event`), oldest first: each state it assigned or was told, and why. */
  events(): Promise<FormationEvent[]>;
  /** Stops the primary as a crash would: `pg_autoctl stop --immediate`, then SIGKILL of its postmaster. */
  stopPrimary(): Promise<FormationNode>;
  /** `pg_autoctl perform switchover`: the primary demoted, the secondary promoted; resolves when the command returns. */
  switchover(): Promise<void>;
  /** Waits until a node other than `not` takes writes; resolves with it. */
  waitForWritablePrimary(opts?: { not?: FormationNode; timeoutMs?: number }): Promise<FormationNode>;
  stop(): Promise<void>;
}

export interface FormationEvent {
  readonly id: number;
  readonly name: string;
  readonly reported: string;
  readonly assigned: string;
  readonly description: string;
}

/** Reads the monitor's `pgautofailover.event` table. */
async function monitorEvents(port: number): Promise<FormationEvent[]> {
  return onServer(
    port,
    async (c) =>
      (await c.query<FormationEvent>(
        "SELECT eventid::int AS id, nodename AS name, reportedstate::text AS reported, goalstate::text AS assigned, description FROM pgautofailover.event WHERE formationid = 'default' ORDER BY eventid",
      )).rows,
    'pg_auto_failover',
  );
}

/** Reads the monitor's `pgautofailover.node` table. */
async function monitorStates(port: number): Promise<Array<{ name: string; reported: string; assigned: string }>> {
  return onServer(
    port,
    async (c) =>
      (await c.query<{ name: string; reported: string; assigned: string }>("SELECT nodename AS name, reportedstate::text AS reported, goalstate::text AS assigned FROM pgautofailover.node WHERE formationid = 'default' ORDER BY nodeid")).rows,
    'pg_auto_failover',
  );
}

/**
 * A pg_auto_failover formation of its own: the monitor, then `node1` (primary) and `node2` (synchronous secondary,
 * cloned from node1), each `pg_autoctl` service a detached process of its own. Resolves once the monitor sees
 * primary/primary and secondary/secondary (synchronous replication on). On failure everything started is stopped.
 */
export async function startAutoFailoverFormation(opts: { timing?: FailoverTiming; timeoutMs?: number } = {}): Promise<AutoFailoverFormation> {
  const { timing = 'fast', timeoutMs = 180_000 } = opts;
  const started = performance.now();
  const ws = new Workspace('pgaf');
  try {
    const [monitorPort, ...nodePorts] = (await freePorts(3)) as [number, number, number];
    const monitorDir = ws.dataDir('monitor');
    // docs/deploying.md's recipe, command for command: the monitor created, made to listen on 127.0.0.1 only
    // (`create monitor` has no --listen; it listens on every interface by default), then run.
    await ws.run(PG_AUTOCTL, ['create', 'monitor', '--pgdata', monitorDir, '--pgport', String(monitorPort), '--hostname', '127.0.0.1', '--auth', 'trust', '--ssl-self-signed']);
    await ws.run(PG_AUTOCTL, ['config', 'set', '--pgdata', monitorDir, 'postgresql.listen_addresses', '127.0.0.1']);
    ws.spawnService('monitor', PG_AUTOCTL, ['run', '--pgdata', monitorDir]);
    await waitFor(
      () =>
        onServer(monitorPort, async (c) => (await c.query("SELECT 1 FROM pg_extension WHERE extname = 'pgautofailover'")).rowCount === 1, 'pg_auto_failover').catch(() => false),
      { timeoutMs: 60_000, intervalMs: 100, what: `the monitor on port ${monitorPort}` },
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${ws.logTail('monitor')}`);
    });
    const monitorUri = (await ws.run(PG_AUTOCTL, ['show', 'uri', '--pgdata', monitorDir, '--formation', 'monitor'])).trim();
    if (timing !== 'default') {
      await onServer(
        monitorPort,
        async (c) => {
          for (const [name, value] of Object.entries(MONITOR_SETTINGS[timing])) await c.query(`ALTER SYSTEM SET ${name} = ${value}`);
          await c.query('SELECT pg_reload_conf()');
        },
        'pg_auto_failover',
      );
    }

    const nodes: FormationNode[] = nodePorts.map((port, i) => ({ name: `node${i + 1}`, port, dataDir: ws.dataDir(`node${i + 1}`) }));
    for (const [i, node] of nodes.entries()) {
      // Created first without --run (initdb or pg_basebackup, registration; Postgres stopped again), so that the
      // keeper's own timeouts are in its configuration before its service starts.
      await ws.run(PG_AUTOCTL, [
        'create', 'postgres', '--pgdata', node.dataDir, '--pgport', String(node.port), '--listen', '127.0.0.1', '--hostname', '127.0.0.1',
        '--auth', 'trust', '--ssl-self-signed', '--monitor', monitorUri, '--name', node.name, '--dbname', FORMATION_DB,
      ]);
      const partitionTimeout = NETWORK_PARTITION_TIMEOUT_S[timing];
      if (partitionTimeout !== null) await ws.run(PG_AUTOCTL, ['config', 'set', '--pgdata', node.dataDir, 'timeout.network_partition_timeout', String(partitionTimeout)]);
      ws.spawnService(node.name, PG_AUTOCTL, ['run', '--pgdata', node.dataDir]);
      const want = i === 0 ? ['single'] : ['primary', 'secondary'];
      await waitFor(
        async () => {
          const states = await monitorStates(monitorPort);
          return want.every((s, k) => states[k]?.reported === s && states[k]?.assigned === s);
        },
        { timeoutMs, intervalMs: 200, what: `${node.name} registered as ${want.join('/')}` },
      ).catch(async (err: Error) => {
        throw new Error(`${err.message}; monitor: ${JSON.stringify(await monitorStates(monitorPort).catch(() => null))}\n${ws.logTail(node.name)}`);
      });
      ws.noteServer(node.dataDir);
    }
    const readyMs = performance.now() - started;
    const uri = (await ws.run(PG_AUTOCTL, ['show', 'uri', '--pgdata', monitorDir, '--formation', 'default'])).trim();
    // Not WHATWG `URL`: it refuses a multi-host authority (the very error of issue #26).
    // The recipe's role for guidgate: it owns its database (serve creates its tables) and may read
    // pg_stat_replication's sync_state (the durability report); nothing more. Roles reach the secondary by replication.
    await onServer(nodes[0]!.port, async (c) => {
      await c.query(`CREATE ROLE ${FORMATION_ROLE} LOGIN`);
      await c.query(`GRANT pg_read_all_stats TO ${FORMATION_ROLE}`);
      await c.query(`ALTER DATABASE ${FORMATION_DB} OWNER TO ${FORMATION_ROLE}`);
    });
    // As printed (sslmode=require, from --ssl-self-signed: guidgate reads it as libpq does), with the user added.
    const url = uri.replace(/^postgres:\/\//, `postgres://${FORMATION_ROLE}@`);

    const primary = async () => {
      for (const n of nodes) if (await isWritable(n.port)) return n;
      return null;
    };
    return {
      uri,
      url,
      monitorPort,
      nodes,
      readyMs,
      primary,
      states: () => monitorStates(monitorPort),
      events: () => monitorEvents(monitorPort),
      async stopPrimary() {
        const node = await primary();
        if (node === null) throw new Error('no writable primary to stop');
        ws.noteServer(node.dataDir);
        await ws.run(PG_AUTOCTL, ['stop', '--immediate', '--pgdata', node.dataDir]);
        // `stop --immediate` only signals pg_autoctl; the crash is the postmaster's SIGKILL, whatever it did by then.
        try {
          ws.crashServer(node.dataDir);
        } catch {
          // already down
        }
        return node;
      },
      async switchover() {
        await ws.run(PG_AUTOCTL, ['perform', 'switchover', '--pgdata', monitorDir, '--formation', 'default'], 180_000);
      },
      async waitForWritablePrimary({ not, timeoutMs: waitMs = 120_000 } = {}) {
        return waitFor(
          async () => {
            for (const n of nodes) if (n.name !== not?.name && (await isWritable(n.port))) return n;
            return null;
          },
          { timeoutMs: waitMs, intervalMs: 100, what: `a writable primary${not === undefined ? '' : ` other than ${not.name}`}` },
        );
      },
      stop: () => ws.stop(),
    };
  } catch (err) {
    await ws.stop();
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// One server of its own

export interface PgServer {
  readonly port: number;
  /** Its `postgres` database, user postgres. */
  readonly url: string;
  /**
   * Starts counting the server's CPU: the function returned gives the µs its processes (the postmaster and its
   * children) have used since, counting those alive at the end (a backend that came and went meanwhile is missed).
   */
  cpuSince(): () => number;
  stop(): Promise<void>;
}

/**
 * CPU time (µs) one process has used so far, 0 when it is gone: from /proc/PID/schedstat (nanoseconds on the CPU)
 * where the kernel keeps it, else from /proc/PID/stat (user + system, in 10 ms ticks: too coarse for short runs).
 */
export function processCpuUs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1000;
  } catch {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(fields[11]) + Number(fields[12])) * 10_000;
    } catch {
      return 0;
    }
  }
}

/**
 * Initializes a data folder (trust auth) and spawns a postmaster on it, on a free loopback port; resolves once it
 * accepts connections. `settings`: more `-c name=value` settings (e.g. `synchronous_commit=on`, the default).
 */
async function initAndStart(ws: Workspace, name: string, port: number, settings: readonly string[] = []): Promise<string> {
  const dataDir = ws.dataDir(name);
  // --no-sync: the files initdb writes need not survive a power cut of this machine during a test.
  await ws.run(`${PG_BIN}/initdb`, ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--no-sync', '--no-instructions']);
  await startPostmaster(ws, name, dataDir, port, settings);
  return dataDir;
}

async function startPostmaster(ws: Workspace, name: string, dataDir: string, port: number, settings: readonly string[] = []): Promise<void> {
  ws.spawnService(name, `${PG_BIN}/postgres`, [...serverArgs(dataDir, port, ws.dir), ...settings.flatMap((x) => ['-c', x])]);
  await waitFor(() => onServer(port, async () => true).catch(() => false), { timeoutMs: 60_000, intervalMs: 50, what: `${name} on port ${port}` }).catch((err: Error) => {
    throw new Error(`${err.message}\n${ws.logTail(name)}`);
  });
  ws.noteServer(dataDir);
}

/** A PostgreSQL server of its own (a benchmark's, whose CPU must not mix with other users' of the shared server). */
export async function startServer(opts: { settings?: readonly string[] } = {}): Promise<PgServer> {
  const ws = new Workspace('pgserver');
  try {
    const [port] = (await freePorts(1)) as [number];
    const dataDir = await initAndStart(ws, 'server', port, opts.settings);
    const postmaster = postmasterPid(dataDir)!;
    return {
      port,
      url: serverUrl(port),
      cpuSince() {
        const pids = () => [postmaster, ...childrenOf(postmaster)];
        const before = new Map(pids().map((pid) => [pid, processCpuUs(pid)]));
        return () => pids().reduce((sum, pid) => sum + processCpuUs(pid) - (before.get(pid) ?? 0), 0);
      },
      stop: () => ws.stop(),
    };
  } catch (err) {
    await ws.stop();
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// A primary and an asynchronous streaming standby

export interface PrimaryWithStandby {
  readonly primaryPort: number;
  readonly standbyPort: number;
  /** The primary's `postgres` database, user postgres. */
  readonly primaryUrl: string;
  readonly standbyUrl: string;
  /**
   * The standby stops receiving WAL (`primary_conninfo` emptied and the configuration reloaded; resolves once its
   * WAL receiver is gone): what the primary commits from now on never reaches it. Merely pausing replay would not
   * do, since a promotion replays everything received.
   */
  cutStandbyReceiving(): Promise<void>;
  /** Waits until the standby has replayed everything the primary has written so far. */
  waitForStandbyCaughtUp(timeoutMs?: number): Promise<void>;
  /** SIGKILL of the primary's postmaster: a crash. */
  killPrimary(): Promise<void>;
  /** `pg_ctl promote` on the standby; resolves once it takes writes. */
  promoteStandby(): Promise<void>;
  stop(): Promise<void>;
}

/** Server settings: loopback only, the socket in the workspace (never the system's socket folder), small. */
function serverArgs(dataDir: string, port: number, socketDir: string): string[] {
  return ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${socketDir}`, '-c', 'shared_buffers=16MB', '-c', 'max_connections=50'];
}

/**
 * A primary (initdb, trust auth) and an asynchronous streaming standby cloned from it with `pg_basebackup -R`,
 * each postmaster spawned directly (not through `pg_ctl start`, so that its PID is the process started here).
 * Resolves once the standby streams.
 */
export async function startPrimaryWithAsyncStandby(): Promise<PrimaryWithStandby> {
  const ws = new Workspace('pgstandby');
  try {
    const [primaryPort, standbyPort] = (await freePorts(2)) as [number, number];
    const primaryDir = await initAndStart(ws, 'primary', primaryPort);
    const standbyDir = ws.dataDir('standby');
    await ws.run(`${PG_BIN}/pg_basebackup`, ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', standbyDir, '-R', '-X', 'stream', '-c', 'fast', '--no-sync']);
    await startPostmaster(ws, 'standby', standbyDir, standbyPort);
    await waitFor(() => onServer(primaryPort, async (c) => (await c.query("SELECT 1 FROM pg_stat_replication WHERE state = 'streaming'")).rowCount === 1), {
      timeoutMs: 30_000,
      intervalMs: 50,
      what: 'the standby streaming',
    });

    return {
      primaryPort,
      standbyPort,
      primaryUrl: serverUrl(primaryPort),
      standbyUrl: serverUrl(standbyPort),
      async cutStandbyReceiving() {
        await onServer(standbyPort, async (c) => {
          await c.query("ALTER SYSTEM SET primary_conninfo = ''");
          await c.query('SELECT pg_reload_conf()');
        });
        await waitFor(() => onServer(standbyPort, async (c) => (await c.query('SELECT 1 FROM pg_stat_wal_receiver')).rowCount === 0), { intervalMs: 50, what: 'the WAL receiver gone' });
        await waitFor(() => onServer(primaryPort, async (c) => (await c.query('SELECT 1 FROM pg_stat_replication')).rowCount === 0), { intervalMs: 50, what: 'the primary without a standby' });
      },
      async waitForStandbyCaughtUp(timeoutMs = 10_000) {
        const lsn = await onServer(primaryPort, async (c) => (await c.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0]!.lsn);
        await waitFor(() => onServer(standbyPort, async (c) => (await c.query<{ ok: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [lsn])).rows[0]!.ok), {
          timeoutMs,
          intervalMs: 20,
          what: `the standby replayed up to ${lsn}`,
        });
      },
      async killPrimary() {
        ws.crashServer(primaryDir);
        await waitFor(() => postmasterPid(primaryDir) === null, { what: 'the primary gone' });
      },
      async promoteStandby() {
        await ws.run(`${PG_BIN}/pg_ctl`, ['promote', '-D', standbyDir, '-w', '-t', '60']);
        await waitFor(() => isWritable(standbyPort), { timeoutMs: 60_000, intervalMs: 50, what: 'the promoted standby writable' });
      },
      stop: () => ws.stop(),
    };
  } catch (err) {
    await ws.stop();
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// A server and a base backup of it, put back on the same timeline

export interface ServerWithBackup {
  readonly port: number;
  /** Its `postgres` database, user postgres. */
  readonly url: string;
  /** `pg_basebackup` of the running server now (`-X stream`, no `-R`): a copy that starts as a primary. */
  takeBackup(): Promise<void>;
  /**
   * The server SIGKILLed and the copy started on a new port: it replays the WAL the backup carries and takes writes
   * on the same timeline, with the same system identifier (no promotion). Resolves with its port.
   */
  replaceWithBackup(): Promise<number>;
  stop(): Promise<void>;
}

/** A server of its own that a test replaces with a base backup of itself, as an operator's restore does. */
export async function startServerWithBackup(): Promise<ServerWithBackup> {
  const ws = new Workspace('pgbackup');
  try {
    const [port] = (await freePorts(1)) as [number];
    const dataDir = await initAndStart(ws, 'server', port);
    const backupDir = ws.dataDir('backup');
    let taken = false;
    return {
      port,
      url: serverUrl(port),
      async takeBackup() {
        await ws.run(`${PG_BIN}/pg_basebackup`, ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', '-D', backupDir, '-X', 'stream', '-c', 'fast', '--no-sync']);
        taken = true;
      },
      async replaceWithBackup() {
        if (!taken) throw new Error('no backup taken');
        ws.crashServer(dataDir);
        await waitFor(() => postmasterPid(dataDir) === null, { what: 'the server gone' });
        const [backupPort] = (await freePorts(1)) as [number];
        await startPostmaster(ws, 'backup', backupDir, backupPort);
        await waitFor(() => isWritable(backupPort), { timeoutMs: 60_000, intervalMs: 50, what: 'the restored copy writable' });
        return backupPort;
      },
      stop: () => ws.stop(),
    };
  } catch (err) {
    await ws.stop();
    throw err;
  }
}
