/**
 * Multi-host PostgreSQL URLs (CONTRACT.md §9): `postgres://user@h1:p1,h2:p2/db?target_session_attrs=read-write`, the
 * form libpq, pg_auto_failover and Patroni print. node-postgres parses a connection string with WHATWG `URL`, which
 * refuses a list of hosts (brianc/node-postgres#1470), so the URL is read here, once, and each host becomes a
 * single-host URL of its own with everything else (user, password, database, sslmode, …) unchanged.
 */

/** One `host:port` of the list, as written (an IPv6 address in brackets). */
export interface PgHost {
  readonly host: string;
  readonly port: number;
  /** `host:port`, as it may be shown (logs, messages). */
  readonly label: string;
  /** The URL with this host alone and without `target_session_attrs`: what node-postgres is given. */
  readonly url: string;
}

export interface PostgresUrl {
  /** In the order written; one for a single-host URL (its `url` the URL as given when it has no target_session_attrs). */
  readonly hosts: readonly PgHost[];
  /** `read-write` (also what `primary` and an absent parameter mean here: guidgate only ever writes). */
  readonly targetSessionAttrs: 'read-write' | 'primary' | null;
}

/** A `--db` URL that cannot be used, naming the part at fault. Never carries the password. */
export class PostgresUrlError extends Error {}

const DEFAULT_PORT = 5432;
/** What `target_session_attrs` may be: every value that asks for a writable server. */
export const ACCEPTED_SESSION_ATTRS = ['read-write', 'primary'] as const;

/** Reads a `postgres://` or `postgresql://` URL with one host or several; throws PostgresUrlError. */
export function parsePostgresUrl(url: string): PostgresUrl {
  const m = /^(postgres(?:ql)?:\/\/)([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/i.exec(url);
  if (m === null) throw new PostgresUrlError('not a PostgreSQL URL (postgres://… or postgresql://…)');
  const [, scheme, authority, path = '', query = ''] = m as unknown as [string, string, string, string | undefined, string | undefined];
  const at = authority.lastIndexOf('@');
  const userinfo = at < 0 ? '' : authority.slice(0, at + 1);
  const hostList = at < 0 ? authority : authority.slice(at + 1);

  const params = new URLSearchParams(query.replace(/^\?/, ''));
  const attrs = params.getAll('target_session_attrs');
  if (attrs.length > 1) throw new PostgresUrlError('target_session_attrs is given more than once');
  const attr = attrs[0];
  if (attr !== undefined && !(ACCEPTED_SESSION_ATTRS as readonly string[]).includes(attr)) {
    throw new PostgresUrlError(`target_session_attrs=${JSON.stringify(attr)} is not accepted: guidgate only writes, so it takes ${ACCEPTED_SESSION_ATTRS.join(' or ')} (or none)`);
  }
  params.delete('target_session_attrs');
  const rest = params.toString();
  const tail = `${path}${rest === '' ? '' : `?${rest}`}`;

  // No host at all (postgres:///db, a Unix socket by default): node-postgres reads it as it always has.
  if (hostList === '') return { hosts: [{ host: '', port: DEFAULT_PORT, label: '(default host)', url: `${scheme}${userinfo}${tail}` }], targetSessionAttrs: (attr as PostgresUrl['targetSessionAttrs']) ?? null };
  const hosts = hostList.split(',').map((entry, i): PgHost => {
    const hp = /^(\[[0-9a-fA-F:.%a-zA-Z]+\]|[^:[\]]+)(?::(\d*))?$/.exec(entry);
    if (hp === null) throw new PostgresUrlError(entry === '' ? `host ${i + 1} of the URL is empty` : `host ${i + 1} of the URL (${JSON.stringify(entry)}) is not host or host:port`);
    const host = hp[1]!;
    const portText = hp[2];
    const port = portText === undefined || portText === '' ? DEFAULT_PORT : Number(portText);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new PostgresUrlError(`the port of host ${i + 1} (${JSON.stringify(portText)}) is not 1..65535`);
    return { host, port, label: `${host}:${port}`, url: `${scheme}${userinfo}${host}:${port}${tail}` };
  });
  if (hosts.length === 1 && attr === undefined) return { hosts: [{ ...hosts[0]!, url }], targetSessionAttrs: null };
  return { hosts, targetSessionAttrs: (attr as PostgresUrl['targetSessionAttrs']) ?? null };
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
