/**
 * How each PostgreSQL driver behaves on a real failover (issue #26), on a pg_auto_failover formation of its own
 * (test/support/pgCluster.ts, run as the postgres user): the formation's multi-host URL with the standby listed
 * first, then the primary stopped (`pg_autoctl stop --immediate`, SIGKILL of its postmaster) while every driver
 * writes through its pool. For each driver it prints: whether the URL is accepted and lands on the primary;
 * what a query in flight at the stop gets, and when; the errors seen while no primary takes writes; when the first
 * write succeeds after the stop and where; what the pool's idle connections do afterwards.
 *
 * Drivers: `pg` with the URL as given (node-postgres has no multi-host support); `pg + rotation`, a sketch of host
 * rotation written here (a pg.Client subclass handed to pg.Pool as its `Client`, which connects to the first host
 * that answers `SHOW transaction_read_only` with off); `postgres` (porsager) with `target_session_attrs=read-write`
 * and with `primary`.
 *
 * Usage: node dist/bench/pgDriverFailover.js [--timing fast|default] [--json]
 */
import { benchArgs } from './benchArgs.js';
import pg from 'pg';
import postgres from 'postgres';
import { startAutoFailoverFormation, type FailoverTiming, type FormationNode } from '../test/support/pgCluster.js';

const { values } = benchArgs({
  run: 'node dist/bench/pgDriverFailover.js',
  about: 'How each PostgreSQL driver behaves on a real failover, on a pg_auto_failover formation of its own (run as the postgres user).',
  options: {
    timing: { type: 'string', default: 'fast', value: 'fast|recommended|default', help: "the formation's failover timing" },
    json: { type: 'boolean', default: false, help: 'print the results as JSON' },
  },
});
const timing = values.timing as FailoverTiming;

/** The hosts of a libpq multi-host URL, in order, and the rest of it. */
export function parseMultiHost(url: string): { hosts: Array<{ host: string; port: number }>; user: string; database: string; targetSessionAttrs: string | null } {
  const m = /^postgres(?:ql)?:\/\/(?:([^@/]*)@)?([^/?]*)(?:\/([^?]*))?(?:\?(.*))?$/.exec(url);
  if (m === null) throw new Error('not a postgres:// URL');
  const params = new URLSearchParams(m[4] ?? '');
  return {
    user: decodeURIComponent(m[1] ?? ''),
    hosts: m[2]!.split(',').map((h) => {
      const [host, port] = h.split(':');
      return { host: host!, port: Number(port ?? 5432) };
    }),
    database: decodeURIComponent(m[3] || 'postgres'),
    targetSessionAttrs: params.get('target_session_attrs'),
  };
}

/**
 * The sketch of host rotation for node-postgres: pg.Pool makes its connections with `new Client(options)` and
 * `client.connect()`; this Client first finds the writable host (a probe connection to each host in turn, `SHOW
 * transaction_read_only`), then connects itself there. A pg.Client cannot connect twice, hence the probe: one extra
 * connection for each new pooled connection, and a host that changes between probe and connect is caught by the
 * first write failing (read-only, 25006) and the connection discarded.
 */
function rotatingClient(hosts: ReadonlyArray<{ host: string; port: number }>, tried: (hostsTried: string) => void): typeof pg.Client {
  class RotatingClient extends pg.Client {
    // pg.Pool connects its clients with a callback; a caller of its own may await the promise.
    override connect(callback?: Parameters<pg.Client['connect']>[0]): never {
      const connected = this.rotate();
      if (callback === undefined) return connected as never;
      const done = callback as (err: Error | null, client?: pg.Client) => void;
      connected.then(() => done(null, this), (err: Error) => done(err));
      return undefined as never;
    }

    private async rotate(): Promise<void> {
      const failures: string[] = [];
      for (const { host, port } of hosts) {
        const probe = new pg.Client({ host, port, user: this.user, database: this.database, connectionTimeoutMillis: 1000 });
        probe.on('error', () => undefined);
        try {
          await probe.connect();
          const { rows } = await probe.query<{ transaction_read_only: string }>('SHOW transaction_read_only');
          if (rows[0]?.transaction_read_only === 'off') {
            this.host = host;
            this.port = port;
            await super.connect();
            return;
          }
          failures.push(`${host}:${port} read-only`);
        } catch (err) {
          failures.push(`${host}:${port} ${err instanceof Error ? err.message : String(err)}`);
        } finally {
          await probe.end().catch(() => undefined);
        }
      }
      tried(failures.join('; '));
      throw new Error(`no writable host: ${failures.join('; ')}`);
    }
  }
  return RotatingClient;
}

/** What the benchmark asks of every driver's pool. */
interface Driver {
  readonly name: string;
  /** Where a query runs: the server's port. */
  port(): Promise<number>;
  write(): Promise<number>;
  /** A query that runs until the server goes away. */
  longQuery(): Promise<unknown>;
  /** Opens `n` pooled connections and leaves them idle. */
  warm(n: number): Promise<void>;
  close(): Promise<void>;
}

const errorText = (err: unknown): string => {
  const e = err as { code?: string; message?: string };
  return `${e.code ?? '-'}: ${(e.message ?? String(err)).replace(/\d+\.\d+\.\d+\.\d+:\d+/g, 'HOST').replace(/port \d+/g, 'port N').slice(0, 110)}`;
};

function pgDriver(name: string, config: pg.PoolConfig): Driver {
  const pool = new pg.Pool({ max: 4, connectionTimeoutMillis: 2000, ...config });
  pool.on('error', () => undefined);
  pool.on('connect', (c) => c.on('error', () => undefined));
  return {
    name,
    port: async () => (await pool.query<{ p: number }>('SELECT inet_server_port() AS p')).rows[0]!.p,
    write: async () => (await pool.query<{ p: number }>('INSERT INTO failover_probe (via) VALUES ($1) RETURNING inet_server_port() AS p', [name])).rows[0]!.p,
    longQuery: () => pool.query('SELECT pg_sleep(600)'),
    warm: async (n) => {
      const clients = await Promise.all(Array.from({ length: n }, () => pool.connect()));
      for (const c of clients) c.release();
    },
    close: () => pool.end(),
  };
}

function porsagerDriver(name: string, url: string): Driver {
  const sql = postgres(url, { max: 4, connect_timeout: 2, onnotice: () => undefined });
  return {
    name,
    port: async () => Number((await sql`SELECT inet_server_port() AS p`)[0]!['p']),
    write: async () => Number((await sql`INSERT INTO failover_probe (via) VALUES (${name}) RETURNING inet_server_port() AS p`)[0]!['p']),
    longQuery: () => sql`SELECT pg_sleep(600)`,
    warm: async (n) => {
      await Promise.all(Array.from({ length: n }, () => sql`SELECT pg_sleep(0.05)`));
    },
    close: () => sql.end({ timeout: 2 }),
  };
}

interface Report {
  driver: string;
  connects: string;
  inFlight?: string;
  outageErrors?: Record<string, number>;
  firstWriteAfterStopMs?: number | null;
  firstWritePort?: number | null;
  idleAfter?: string;
  wrongServerWrites?: number;
}

const formation = await startAutoFailoverFormation({ timing });
const reports: Report[] = [];
const drivers: Driver[] = [];
try {
  const [primary, standby] = formation.nodes as unknown as [FormationNode, FormationNode];
  // The standby first: a driver that ignores target_session_attrs lands on it.
  const standbyFirst = formation.url.replace(`127.0.0.1:${primary.port},127.0.0.1:${standby.port}`, `127.0.0.1:${standby.port},127.0.0.1:${primary.port}`);
  const withAttrs = (attrs: string) => standbyFirst.replace('target_session_attrs=read-write', `target_session_attrs=${attrs}`);
  const parsed = parseMultiHost(standbyFirst);
  // The drivers' own role and database (the recipe's, test/support/pgCluster.ts), so that the table is theirs.
  const admin = new pg.Client({ host: '127.0.0.1', port: primary.port, user: parsed.user, database: parsed.database });
  await admin.connect();
  await admin.query('CREATE TABLE failover_probe (id bigint GENERATED ALWAYS AS IDENTITY, via text, at timestamptz DEFAULT clock_timestamp())');
  await admin.end();

  const candidates: Array<{ name: string; make: () => Driver }> = [
    { name: 'pg (URL as given)', make: () => pgDriver('pg (URL as given)', { connectionString: standbyFirst }) },
    { name: 'pg + rotation', make: () => pgDriver('pg + rotation', { user: parsed.user, database: parsed.database, Client: rotatingClient(parsed.hosts, () => undefined) } as pg.PoolConfig) },
    { name: 'postgres read-write', make: () => porsagerDriver('postgres read-write', withAttrs('read-write')) },
    { name: 'postgres primary', make: () => porsagerDriver('postgres primary', withAttrs('primary')) },
  ];
  for (const c of candidates) {
    const report: Report = { driver: c.name, connects: '' };
    reports.push(report);
    try {
      const d = c.make();
      const port = await d.port();
      report.connects = port === primary.port ? `yes, to the primary (${primary.name}), skipping the standby listed first` : `NO: landed on port ${port} (${port === standby.port ? 'the standby' : '?'})`;
      drivers.push(d);
    } catch (err) {
      report.connects = `no: ${errorText(err)}`;
    }
  }
  for (const d of drivers) await d.warm(3);

  // Every driver writes every 50 ms through its pool; one long query each is in flight when the primary stops.
  const start = { at: 0 };
  const outcomes = new Map<string, { errors: Record<string, number>; first: { ms: number; port: number } | null; wrong: number }>();
  const inFlight = drivers.map((d) => {
    const t = performance.now();
    return d.longQuery().then(
      () => 'completed (?)',
      (err) => `${errorText(err)} after ${Math.round(performance.now() - Math.max(t, start.at))} ms from the stop`,
    );
  });
  await new Promise((r) => setTimeout(r, 300));
  let writing = true;
  const loops = drivers.map(async (d) => {
    const o = { errors: {} as Record<string, number>, first: null as { ms: number; port: number } | null, wrong: 0 };
    outcomes.set(d.name, o);
    while (writing) {
      try {
        const port = await d.write();
        if (start.at > 0 && o.first === null && port !== primary.port) o.first = { ms: performance.now() - start.at, port };
        if (start.at > 0 && port === primary.port) o.wrong++;
      } catch (err) {
        if (start.at > 0) o.errors[errorText(err)] = (o.errors[errorText(err)] ?? 0) + 1;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  await new Promise((r) => setTimeout(r, 500));
  start.at = performance.now();
  const stopped = await formation.stopPrimary();
  const next = await formation.waitForWritablePrimary({ not: stopped });
  const failoverMs = performance.now() - start.at;
  // Every driver gets up to 30 s after the secondary takes writes to find it.
  const deadline = performance.now() + 30_000;
  while (performance.now() < deadline && drivers.some((d) => outcomes.get(d.name)!.first === null)) await new Promise((r) => setTimeout(r, 100));
  writing = false;
  await Promise.all(loops);
  // A long query on a server that did not go down (a driver that landed on the standby) is still running: not awaited.
  const inFlightResults = await Promise.all(inFlight.map((p) => Promise.race([p, new Promise<string>((r) => setTimeout(() => r(`still running ${Math.round((performance.now() - start.at) / 1000)} s after the stop (its server did not go down)`), 100))])));

  for (const [i, d] of drivers.entries()) {
    const r = reports.find((x) => x.driver === d.name)!;
    const o = outcomes.get(d.name)!;
    r.inFlight = inFlightResults[i]!;
    r.outageErrors = o.errors;
    r.firstWriteAfterStopMs = o.first === null ? null : Math.round(o.first.ms);
    r.firstWritePort = o.first?.port ?? null;
    r.wrongServerWrites = o.wrong;
    // The pool's idle connections (all to the old primary) after the failover: the next queries.
    try {
      const ports = await Promise.all(Array.from({ length: 3 }, () => d.port()));
      r.idleAfter = `next 3 queries answered by port(s) ${[...new Set(ports)].join(', ')} (${ports.every((p) => p === next.port) ? 'the new primary' : 'NOT the new primary'})`;
    } catch (err) {
      r.idleAfter = `failed: ${errorText(err)}`;
    }
  }
  const out = { timing, readyMs: Math.round(formation.readyMs), failoverMs: Math.round(failoverMs), newPrimary: next.name, reports };
  if (values.json) process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  else {
    process.stdout.write(`formation (${timing} timing) ready in ${(out.readyMs / 1000).toFixed(1)} s; ${next.name} writable ${(failoverMs / 1000).toFixed(1)} s after \`pg_autoctl stop --immediate\` of ${stopped.name}\n`);
    for (const r of reports) {
      process.stdout.write(`\n## ${r.driver}\n- multi-host URL, standby first: ${r.connects}\n`);
      if (r.inFlight === undefined) continue;
      process.stdout.write(`- query in flight at the stop: ${r.inFlight}\n`);
      process.stdout.write(`- first write after the stop: ${r.firstWriteAfterStopMs === null ? 'none within 30 s after the failover' : `${r.firstWriteAfterStopMs} ms, on port ${r.firstWritePort}`}; writes on the old primary after the stop: ${r.wrongServerWrites}\n`);
      process.stdout.write(`- errors meanwhile: ${Object.entries(r.outageErrors ?? {}).map(([e, n]) => `${n}× ${e}`).join(' | ') || 'none'}\n`);
      process.stdout.write(`- idle pooled connections afterwards: ${r.idleAfter}\n`);
    }
  }
} finally {
  await Promise.all(drivers.map((d) => d.close().catch(() => undefined)));
  await formation.stop();
}
