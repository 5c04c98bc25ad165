/**
 * A database URL (`postgres://user:password@h1:p1,h2:p2/db?…`) split the one way every part of guidgate reads it:
 * the user info ends at the LAST `@`, so that a password holding an unencoded `/`, `#`, `?` or `@` stays in the user
 * info (and is never shown as a host or a path). The price: an `@` in a query value must be written `%40`.
 */
export interface DbUrlParts {
  /** `postgres://` as written. */
  readonly scheme: string;
  /** Before the `:` of the user info (as written), or null without user info. */
  readonly user: string | null;
  /** After that `:` (as written), or null without one. */
  readonly password: string | null;
  /** Between the user info and the first `/`, `?` or `#`: one host, several (`h1:p1,h2:p2`), or none. */
  readonly hostList: string;
  /** The rest: path, query and fragment, as written. */
  readonly rest: string;
}

export function splitDbUrl(url: string): DbUrlParts | null {
  const m = /^([a-z][a-z0-9+.-]*:\/\/)([\s\S]*)$/i.exec(url);
  if (m === null) return null;
  const scheme = m[1]!;
  const body = m[2]!;
  const at = body.lastIndexOf('@');
  const afterAt = at < 0 ? body : body.slice(at + 1);
  const end = afterAt.search(/[/?#]/);
  const hostList = end < 0 ? afterAt : afterAt.slice(0, end);
  const rest = end < 0 ? '' : afterAt.slice(end);
  if (at < 0) return { scheme, user: null, password: null, hostList, rest };
  const userinfo = body.slice(0, at);
  const colon = userinfo.indexOf(':');
  return colon < 0
    ? { scheme, user: userinfo, password: null, hostList, rest }
    : { scheme, user: userinfo.slice(0, colon), password: userinfo.slice(colon + 1), hostList, rest };
}

/** One entry of a host list: a name, an IPv4 address or an IPv6 one in brackets, then an optional `:port`. */
export const HOST_ENTRY = /^(\[[0-9a-fA-F:.%a-zA-Z]+\]|[^:[\]@\s]+)(?::(\d*))?$/;

/** Whether a host list reads as hosts (each entry a host or host:port); what does not is never shown. */
export const isHostList = (hostList: string): boolean => hostList === '' || hostList.split(',').every((entry) => HOST_ENTRY.test(entry));

/**
 * A URL as it may be shown (messages, logs, startup lines): the password replaced by `***` (also a `password=`
 * parameter), and a host list that does not read as hosts not shown at all. Null: not a URL.
 */
export function shownDbUrl(url: string): string | null {
  const parts = splitDbUrl(url);
  if (parts === null) return null;
  const userinfo = parts.user === null ? '' : `${parts.user}${parts.password === null ? '' : ':***'}@`;
  const hosts = isHostList(parts.hostList) ? parts.hostList : '(hosts not shown: they do not parse)';
  const rest = parts.rest.replace(/([?&]password=)[^&#]*/gi, '$1***');
  return `${parts.scheme}${userinfo}${hosts}${rest}`;
}

/** The URL without its password (user name kept; a `password=` parameter dropped too). Null: not a URL. */
export function dbUrlWithoutPassword(url: string): string | null {
  const parts = splitDbUrl(url);
  if (parts === null) return null;
  const rest = parts.rest
    .replace(/([?&])password=[^&#]*(&?)/i, (_m, sep: string, next: string) => (next === '' ? '' : sep))
    .replace(/[?&]$/, '');
  return `${parts.scheme}${parts.user === null ? '' : `${parts.user}@`}${parts.hostList}${rest}`;
}
