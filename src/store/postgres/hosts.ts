import pg from 'pg';
import type { PgHost } from './postgresUrl.js';

/**
 * Host rotation for node-postgres, which has no multi-host support (brianc/node-postgres#1470): the hosts of a
 * multi-host URL (postgresUrl.ts), the connections of a pool sent to the one that takes writes.
 */

/** What the rotation reports: no host took writes (once per outage), or writes go to a host (at start and when it changes). */
export type HostEvent = { readonly kind: 'none'; readonly tried: string } | { readonly kind: 'primary'; readonly host: string; readonly previous: string | null };

/** Thrown when every listed host was tried and none is a writable primary; says what each one was. */
export class NoWritableHostError extends Error {}

/** The host a connection failed on, for the pool to move on to the next one; `cause` is what happened there. */
class HostFailure extends Error {
  constructor(readonly host: PgHost, readonly index: number, readonly why: string, override readonly cause: unknown) {
    super(`${host.label}: ${why}`);
  }
}

const reasonOf = (err: unknown): string => (err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ');

/**
 * Which host new connections go to, shared by every pool of one store: the one that last took writes, else the next
 * in the list. A failure there (refused, timed out, a standby, read-only) moves every later connection on.
 */
export class HostRotation {
  private current = 0;
  private primary: string | null = null;
  private outage = false;

  constructor(readonly hosts: readonly PgHost[], private readonly onEvent: (e: HostEvent) => void = () => undefined) {}

  /** The host the next connection tries, and its index. */
  next(): { host: PgHost; index: number } {
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

/**
 * Whether the server behind a fresh session takes writes, as libpq's `target_session_attrs=read-write` asks: not a
 * standby (in recovery) and not read-only by default (pg_auto_failover keeps a standby it promotes read-only until
 * the old primary is presumed gone). Null: writable; else why not.
 */
async function notWritable(client: pg.ClientBase): Promise<string | null> {
  const { rows } = await client.query<{ recovery: boolean; ro: string }>({
    name: 'guidgate_writable',
    text: "SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS ro",
  });
  if (rows[0]?.recovery === true) return 'a standby (in recovery)';
  if (rows[0]?.ro !== 'off') return 'read-only (default_transaction_read_only)';
  return null;
}

/**
 * A pg.Pool whose new connections go to the writable primary among `rotation`'s hosts: each is made to the host
 * the rotation names, checked (`notWritable`) before the pool hands it out, and on a failure there (refused, timed
 * out, a standby) the next host is tried, each host once per acquisition. When none takes writes the acquisition
 * fails with NoWritableHostError, naming every host and what it was (never a password). A connection the pool
 * already holds is not checked again: one whose server went away or was demoted fails its next statement and is
 * closed (the store's `withClient`, pg.Pool's own `query`), so the next one rotates.
 */
export function rotatingPool(config: pg.PoolConfig, rotation: HostRotation): pg.Pool {
  class RotatingClient extends pg.Client {
    readonly target: { host: PgHost; index: number };
    constructor(options: pg.ClientConfig) {
      const target = rotation.next();
      super({ ...options, connectionString: target.host.url });
      this.target = target;
    }

    // pg.Pool always connects its clients with a callback.
    override connect(callback?: Parameters<pg.Client['connect']>[0]): never {
      const done = callback as ((err: Error | null) => void) | undefined;
      if (done === undefined) throw new Error('RotatingClient: pg.Pool connects with a callback');
      super.connect((err: Error | undefined) => done(err === undefined || err === null ? null : new HostFailure(this.target.host, this.target.index, reasonOf(err), err)));
      return undefined as never;
    }
  }

  class RotatingPool extends pg.Pool {
    override connect(): Promise<pg.PoolClient>;
    override connect(callback: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): void;
    override connect(callback?: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): Promise<pg.PoolClient> | void {
      const acquired = this.acquire();
      if (callback === undefined) return acquired;
      acquired.then(
        (client) => callback(undefined, client, (release) => client.release(release as boolean | Error | undefined)),
        (err: Error) => callback(err, undefined, () => undefined),
      );
    }

    private async acquire(): Promise<pg.PoolClient> {
      const tried: string[] = [];
      const single = rotation.hosts.length === 1;
      let lastCause: unknown = null;
      for (let attempt = 0; attempt < rotation.hosts.length; attempt++) {
        let client: pg.PoolClient;
        try {
          client = await super.connect();
        } catch (err) {
          // Anything but a new connection failing on its host (the pool ended, a wait for a busy pool timed out) is not a host's fault.
          const failure = err instanceof HostFailure ? err : err instanceof Error && err.cause instanceof HostFailure ? err.cause : null;
          if (failure === null) throw err;
          rotation.failed(failure.index);
          tried.push(`${failure.host.label} (${err === failure ? failure.why : reasonOf(err)})`);
          lastCause = failure.cause;
          continue;
        }
        const target = (client as unknown as { target?: RotatingClient['target'] }).target;
        // An idle connection handed back: it was checked when it was made.
        if (target === undefined || (client as unknown as { checked?: boolean }).checked === true) return client;
        let why: string | null;
        try {
          why = await notWritable(client);
        } catch (err) {
          client.release(true);
          rotation.failed(target.index);
          tried.push(`${target.host.label} (${reasonOf(err)})`);
          lastCause = err;
          continue;
        }
        if (why === null) {
          (client as unknown as { checked: boolean }).checked = true;
          rotation.succeeded(target.index);
          return client;
        }
        client.release(true);
        rotation.failed(target.index);
        tried.push(`${target.host.label} (${why})`);
        lastCause = null;
      }
      const message = `no writable PostgreSQL host: tried ${tried.join(', ')}`;
      rotation.none(message);
      // One host: its own error as it was (its SQLSTATE says what failed); a standby has none.
      if (single && lastCause !== null) throw lastCause;
      throw new NoWritableHostError(message);
    }
  }

  return new RotatingPool({ ...config, Client: RotatingClient as unknown as typeof pg.Client });
}
