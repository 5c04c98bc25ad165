/**
 * Multi-host PostgreSQL URLs (CONTRACT.md §9): `postgres://user@h1:p1,h2:p2/db?target_session_attrs=read-write`, the
 * form libpq, pg_auto_failover and Patroni print. node-postgres parses a connection string with WHATWG `URL`, which
 * refuses a list of hosts (brianc/node-postgres#1470), so the URL is read here, once, and each host becomes a
 * single-host URL of its own with everything else (user, password, database, …) unchanged but libpq's TLS parameters,
 * which are applied here with libpq's meaning (tls.ts).
 */

import { HOST_ENTRY, splitDbUrl } from '../../shared/dbUrl.js';

/**
 * `sslmode` as libpq defines it (CONTRACT.md §9 v4): `disable` plain; `allow` plain, TLS if the server refuses
 * that; `prefer` (libpq's default, and what `pg_autoctl show uri` prints) TLS if the server offers it, else plain;
 * `require` TLS without verifying the server (verified against `sslrootcert` when one is given, as libpq does);
 * `verify-ca` TLS with the server's certificate signed by a trusted CA; `verify-full` that and the host's name.
 */
export const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

/** The URL's TLS settings, the same for every host: the mode and libpq's file parameters (paths). */
export interface PgTls {
  readonly mode: SslMode;
  /** Whether `sslmode` was written in the URL (else libpq's default, `prefer`, or PGSSLMODE). */
  readonly explicit: boolean;
  readonly rootCert: string | null;
  readonly cert: string | null;
  readonly key: string | null;
}

/** One `host:port` of the list, as written (an IPv6 address in brackets). */
export interface PgHost {
  readonly host: string;
  readonly port: number;
  /** `host:port`, as it may be shown (logs, messages). */
  readonly label: string;
  /**
   * The URL with this host alone, without `target_session_attrs` and libpq's TLS parameters (`tls` carries them,
   * node-postgres reads them otherwise), the user info percent-encoded: what node-postgres is given.
   */
  readonly url: string;
  readonly tls: PgTls;
}

export interface PostgresUrl {
  /** In the order written. */
  readonly hosts: readonly PgHost[];
  /** `read-write` (also what `primary` and an absent parameter mean here: guidgate only ever writes). */
  readonly targetSessionAttrs: 'read-write' | 'primary' | null;
  readonly tls: PgTls;
}

/** A `--db` URL that cannot be used, naming the part at fault. Never carries the password, nor a host that does not parse. */
export class PostgresUrlError extends Error {}

const DEFAULT_PORT = 5432;
/** What `target_session_attrs` may be: every value that asks for a writable server. */
export const ACCEPTED_SESSION_ATTRS = ['read-write', 'primary'] as const;
/** libpq's TLS parameters: read here, never handed to node-postgres (which gives them other meanings). */
const TLS_PARAMETERS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey'] as const;

/** A user name or password as written (percent-encoded or not), percent-encoded for node-postgres's URL parser. */
function encodedUserinfoPart(text: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(text);
  } catch {
    decoded = text;
  }
  return encodeURIComponent(decoded);
}

function single(params: URLSearchParams, name: string): string | undefined {
  const values = params.getAll(name);
  if (values.length > 1) throw new PostgresUrlError(`${name} is given more than once`);
  return values[0];
}

function tlsOf(params: URLSearchParams, env: NodeJS.ProcessEnv): PgTls {
  const written = single(params, 'sslmode');
  const fromEnv = env['PGSSLMODE'] === undefined || env['PGSSLMODE'] === '' ? undefined : env['PGSSLMODE'];
  const mode = written ?? fromEnv ?? 'prefer';
  if (!(SSL_MODES as readonly string[]).includes(mode)) {
    throw new PostgresUrlError(`${written === undefined ? 'PGSSLMODE' : 'sslmode'}=${JSON.stringify(mode)} is not one of ${SSL_MODES.join(', ')} (libpq's)`);
  }
  const file = (name: string): string | null => single(params, name) ?? null;
  const tls: PgTls = { mode: mode as SslMode, explicit: written !== undefined, rootCert: file('sslrootcert'), cert: file('sslcert'), key: file('sslkey') };
  if (tls.mode === 'verify-ca' && tls.rootCert === null) throw new PostgresUrlError('sslmode=verify-ca needs sslrootcert (the CA that signed the server\'s certificate)');
  return tls;
}

/** Reads a `postgres://` or `postgresql://` URL with one host or several; throws PostgresUrlError. */
export function parsePostgresUrl(url: string, env: NodeJS.ProcessEnv = process.env): PostgresUrl {
  const parts = /^postgres(?:ql)?:\/\//i.test(url) ? splitDbUrl(url) : null;
  if (parts === null) throw new PostgresUrlError('not a PostgreSQL URL (postgres://… or postgresql://…)');
  const { scheme, hostList } = parts;
  const m = /^([^?#]*)(\?[^#]*)?(#.*)?$/.exec(parts.rest)!;
  const path = m[1] ?? '';
  const query = m[2] ?? '';
  const userinfo = parts.user === null ? '' : `${encodedUserinfoPart(parts.user)}${parts.password === null ? '' : `:${encodedUserinfoPart(parts.password)}`}@`;

  const params = new URLSearchParams(query.replace(/^\?/, ''));
  const attr = single(params, 'target_session_attrs');
  if (attr !== undefined && !(ACCEPTED_SESSION_ATTRS as readonly string[]).includes(attr)) {
    throw new PostgresUrlError(`target_session_attrs=${JSON.stringify(attr)} is not accepted: guidgate only writes, so it takes ${ACCEPTED_SESSION_ATTRS.join(' or ')} (or none)`);
  }
  const tls = tlsOf(params, env);
  params.delete('target_session_attrs');
  for (const name of TLS_PARAMETERS) params.delete(name);
  const rest = params.toString();
  const tail = `${path}${rest === '' ? '' : `?${rest}`}`;
  const targetSessionAttrs = (attr as PostgresUrl['targetSessionAttrs'] | undefined) ?? null;

  // No host at all (postgres:///db, a Unix socket by default): node-postgres reads it as it always has.
  if (hostList === '') return { hosts: [{ host: '', port: DEFAULT_PORT, label: '(default host)', url: `${scheme}${userinfo}${tail}`, tls }], targetSessionAttrs, tls };
  const hosts = hostList.split(',').map((entry, i): PgHost => {
    const hp = HOST_ENTRY.exec(entry);
    // The entry itself is never shown: what does not parse may be part of a password written unencoded.
    if (hp === null) throw new PostgresUrlError(entry === '' ? `host ${i + 1} of the URL is empty` : `host ${i + 1} of the URL is not host or host:port (not shown: it may be part of a password)`);
    const host = hp[1]!;
    const portText = hp[2];
    const port = portText === undefined || portText === '' ? DEFAULT_PORT : Number(portText);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new PostgresUrlError(`the port of host ${i + 1} (${JSON.stringify(portText)}) is not 1..65535`);
    return { host, port, label: `${host}:${port}`, url: `${scheme}${userinfo}${host}:${port}${tail}`, tls };
  });
  return { hosts, targetSessionAttrs, tls };
}
/** What is wrong with a PostgreSQL `--db` URL, or null (the command line's check: exit 2 naming the part). */
export function postgresUrlProblem(url: string): string | null {
  try {
    parsePostgresUrl(url);
    return null;
  } catch (err) {
    if (err instanceof PostgresUrlError) return err.message;
    throw err;
  }
}
