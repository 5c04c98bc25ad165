import pg from 'pg';
import type { PgHost } from './postgresUrl.js';
import { connectionTls, plainIfDeclined, readTlsFiles, type ConnectionTls, type TlsFiles } from './tls.js';

/**
 * Host rotation for node-postgres, which has no multi-host support (brianc/node-postgres#1470): the hosts of a
 * multi-host URL (postgresUrl.ts), the connections of a pool sent to the one that takes writes. As porsager/postgres
 * does it: one host index, read when a connection is made and advanced when that host fails, and one predicate
 * (`tryNext`) that says whether a fresh session is the one asked for.
 */

/** What the rotation reports: no host took writes (once per outage), or writes go to a host (at start and when it changes). */
export type HostEvent = { readonly kind: 'none'; readonly tried: string } | { readonly kind: 'primary'; readonly host: string; readonly previous: string | null };

/** Thrown when every listed host was tried and none is a writable primary; says what each one was. */
export class NoWritableHostError extends Error {}

/** One host of the list, by its place in it. */
interface Target {
  readonly host: PgHost;
  readonly index: number;
}

/** Why a connection was not kept on its host, for the pool to move on to the next one; `cause`: the error there, null for a session that was not the one asked for. */
class HostFailure extends Error {
  constructor(readonly target: Target, readonly why: string, override readonly cause: unknown) {
    super(`${target.host.label}: ${why}`);
  }
}

const reasonOf = (err: unknown): string => (err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ');

/** The host failure behind an acquisition's error: itself, or the cause of pg-pool's "terminated due to connection timeout". */
const hostFailureOf = (err: unknown): HostFailure | null =>
  err instanceof HostFailure ? err : err instanceof Error && err.cause instanceof HostFailure ? err.cause : null;

const INVALID_AUTHORIZATION = '28000'; // what pg_hba.conf's `hostssl` answers a plain connection
const refusedPlainly = (err: unknown): boolean => err instanceof Error && 'code' in err && err.code === INVALID_AUTHORIZATION;

/**
 * Which host new connections go to, shared by every pool of one store: the one that last took writes, else the next
 * in the list. A failure there (refused, timed out, a standby, read-only) moves every later connection on.
 */
export class HostRotation {
  private current = 0;
  private primary: string | null = null;
  private outage = false;

  constructor(readonly hosts: readonly PgHost[], private readonly onEvent: (e: HostEvent) => void = () => undefined) {}

  /** The host that last took writes, null before any did. */
  primaryLabel(): string | null {
    return this.primary;
  }

  /** The host the next connection tries. */
  next(): Target {
    return { host: this.hosts[this.current]!, index: this.current };
  }

  failed(index: number): void {
    // Several connections may fail on one host at once: it moves on once.
    if (this.current === index) this.current = (index + 1) % this.hosts.length;
  }

  succeeded(index: number): void {
    this.current = index;
    const label = this.hosts[index]!.label;
    if (label !== this.primary || this.outage) {
      const previous = this.primary;
      this.primary = label;
      this.outage = false;
      this.onEvent({ kind: 'primary', host: label, previous });
    }
  }

  none(tried: string): void {
    if (this.outage) return;
    this.outage = true;
    this.onEvent({ kind: 'none', tried });
  }
}

/** What a fresh session says of itself: whether the server is in recovery, and `transaction_read_only`. */
export interface SessionState {
  readonly inRecovery: boolean;
  readonly readOnly: string;
}

/**
 * Whether a fresh session is not what libpq's `target_session_attrs=read-write` asks for, so the next host is
 * tried: a standby (in recovery), or read-only by default (pg_auto_failover keeps a standby it promotes read-only
 * until the old primary is presumed gone). Null: writable; else why not.
 */
export function tryNext(session: SessionState): string | null {
  if (session.inRecovery) return 'a standby (in recovery)';
  if (session.readOnly !== 'off') return 'read-only (default_transaction_read_only)';
  return null;
}

async function sessionState(client: pg.ClientBase): Promise<SessionState> {
  const { rows } = await client.query<{ recovery: boolean; ro: string }>({
    name: 'guidgate_writable',
    text: "SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS ro",
  });
  return { inRecovery: rows[0]?.recovery === true, readOnly: rows[0]?.ro ?? '' };
}

/**
 * How a pool's connections reach the rotation's hosts. Every host of one URL has the same TLS settings (libpq's
 * sslmode, tls.ts), its files read once.
 */
class HostConnector {
  private readonly files: TlsFiles;
  // sslmode=allow: the hosts that refused a plain connection, asked with TLS from then on.
  private readonly refusedPlain = new Set<number>();

  constructor(readonly rotation: HostRotation) {
    this.files = readTlsFiles(this.tls);
  }

  private get tls() {
    return this.rotation.hosts[0]!.tls;
  }

  tlsFor(target: Target): ConnectionTls {
    return connectionTls(this.tls, this.files, this.refusedPlain.has(target.index));
  }

  /** What failed, and for a TLS failure the sslmode that asked for it (the server declined TLS, a certificate failed). */
  connectFailure(target: Target, err: unknown): HostFailure {
    const why = reasonOf(err);
    const tlsFailure = /SSL|certificate|self[- ]signed|TLS/i.test(why);
    const { mode, explicit } = this.tls;
    return new HostFailure(target, tlsFailure && mode !== 'disable' ? `${why} (sslmode=${mode}${explicit ? '' : ", libpq's default"})` : why, err);
  }

  /** sslmode=allow: a server that refused the plain connection (pg_hba.conf's hostssl) is asked again with TLS, as libpq does. */
  askAgainWithTls(failure: HostFailure): boolean {
    if (this.tls.mode !== 'allow' || this.refusedPlain.has(failure.target.index) || !refusedPlainly(failure.cause)) return false;
    this.refusedPlain.add(failure.target.index);
    return true;
  }
}

/** pg-pool hands its own options to every client it makes: the connector rides along with them. */
interface HostPoolConfig extends pg.PoolConfig {
  readonly connector: HostConnector;
}

/** A connection made to the host the rotation names when it is made; a failure to connect names that host. */
class HostClient extends pg.Client {
  readonly target: Target;
  private readonly connector: HostConnector;

  // Optional only because pg-pool's type for a client class takes no argument; pg-pool always passes its options.
  constructor(options?: HostPoolConfig) {
    if (options === undefined) throw new Error('a HostClient is made by its HostPool');
    const target = options.connector.rotation.next();
    const how = options.connector.tlsFor(target);
    super({ ...options, connectionString: target.host.url, ssl: how.ssl });
    if (how.plainIfDeclined) plainIfDeclined(this);
    this.target = target;
    this.connector = options.connector;
  }

  override connect(): Promise<pg.Client>;
  override connect(callback: (err: Error | null, c: pg.Client) => void): void;
  override connect(callback?: (err: Error | null, c: pg.Client) => void): Promise<pg.Client> | void {
    if (callback === undefined) return super.connect().catch((err: unknown) => Promise.reject(this.connector.connectFailure(this.target, err)));
    super.connect((err: Error | null) => callback(err === null || err === undefined ? null : this.connector.connectFailure(this.target, err), this));
  }

  /** pg-pool's verify, on a new connection only: kept if it takes writes, else failed with why not. */
  async admit(): Promise<void> {
    let why: string | null;
    try {
      why = tryNext(await sessionState(this));
    } catch (err) {
      throw new HostFailure(this.target, reasonOf(err), err);
    }
    if (why !== null) throw new HostFailure(this.target, why, null);
    this.connector.rotation.succeeded(this.target.index);
  }
}

/**
 * A pg.Pool whose new connections go to the writable primary among `rotation`'s hosts: each is made to the host
 * the rotation names and checked (`tryNext`) before the pool hands it out; on a failure there (refused, timed out,
 * a standby) the next host is tried, each host once per acquisition. When none takes writes the acquisition fails
 * with NoWritableHostError, naming every host and what it was (never a password). A connection the pool already
 * holds is not checked again on its server: one whose server went away fails its next statement and is closed
 * (the store's `withClient`, pg.Pool's own `query`), so the next one rotates. But one made to a host other than the
 * one that last took writes is closed when it is next handed out: on an old primary fenced read-only (a
 * switchover) a write fails, but a read does not, and would not see what the new primary has.
 */
class HostPool extends pg.Pool {
  constructor(config: pg.PoolConfig, private readonly connector: HostConnector) {
    const options: HostPoolConfig = {
      ...config,
      connector,
      Client: HostClient,
      // pg-pool's check of a new connection, before its first use: a failure is closed (not awaited) and handed to the acquisition.
      verify: (client, done) => (client instanceof HostClient ? client.admit().then(() => done(), done) : done()),
    };
    super(options);
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: Error | boolean) => void) => void): void;
  override connect(callback?: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: Error | boolean) => void) => void): Promise<pg.PoolClient> | void {
    const acquired = this.acquire();
    if (callback === undefined) return acquired;
    acquired.then(
      (client) => callback(undefined, client, (release?: Error | boolean) => client.release(release)),
      (err: Error) => callback(err, undefined, () => undefined),
    );
  }

  private async acquire(): Promise<pg.PoolClient> {
    const { rotation } = this.connector;
    const tried: string[] = [];
    let lastCause: unknown = null;
    for (let attempt = 0; attempt < rotation.hosts.length; attempt++) {
      try {
        // A pooled connection to a host that no longer takes writes (the primary changed since it was made) is
        // closed, never used: a read there would not fail (a fenced, read-only old primary answers SELECTs) but
        // would not see what is written on the new primary. Each one is dropped once; new ones go to the primary.
        for (;;) {
          const client = await super.connect();
          const primary = rotation.primaryLabel();
          if (primary === null || !(client instanceof HostClient) || client.target.host.label === primary) return client;
          client.release(true);
        }
      } catch (err) {
        // Anything but a new connection failing on its host (the pool ended, a wait for a busy pool timed out) is not a host's fault.
        const failure = hostFailureOf(err);
        if (failure === null) throw err;
        if (this.connector.askAgainWithTls(failure)) {
          attempt--;
          continue;
        }
        rotation.failed(failure.target.index);
        tried.push(`${failure.target.host.label} (${err === failure ? failure.why : reasonOf(err)})`);
        lastCause = failure.cause;
      }
    }
    const message = `no writable PostgreSQL host: tried ${tried.join(', ')}`;
    rotation.none(message);
    // One host: its own error as it was (its SQLSTATE says what failed); a standby has none.
    if (rotation.hosts.length === 1 && lastCause !== null) throw lastCause;
    throw new NoWritableHostError(message);
  }
}

export function rotatingPool(config: pg.PoolConfig, rotation: HostRotation): pg.Pool {
  return new HostPool(config, new HostConnector(rotation));
}
