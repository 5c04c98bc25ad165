import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionClosedReason } from '../telemetry/metrics.js';

/**
 * Idle keep-alive of a connection that has carried a channel's request (`POST /v1/transfers`, `GET
 * /v1/transfers/{guid}`, past the key check): fastify's default, longer than the 60 s idle timeout of common load
 * balancers and proxies, so that it is they who close an idle connection, never the relay under a request in flight.
 */
export const CHANNEL_KEEP_ALIVE_MS = 72_000;
/**
 * Idle keep-alive of every other connection (health checks, metrics, the API description, the console, requests
 * refused E401/E403): short, since anyone who can reach the port can open one. Enough for a few requests in a row.
 */
export const OTHER_KEEP_ALIVE_MS = 5_000;

export interface ConnectionLimits {
  /** Connections held at most. */
  readonly maxConnections: number;
  /** Connections held at most from one address (an IPv6 client: from one /64). */
  readonly maxPerAddress: number;
  /** Told about every connection closed to keep these limits (metrics). */
  readonly onClosed?: (reason: ConnectionClosedReason) => void;
}

export interface ConnectionGuard {
  /**
   * The connection `req` came on carries a channel's request: the long keep-alive from this response on (which
   * says so in its `Keep-Alive` header), and closed last for a new one. Before `res`'s headers are written.
   */
  carriesChannel(req: IncomingMessage, res: ServerResponse): void;
}

interface Connection {
  /** The TCP socket (under TLS, the one the TLS socket wraps). */
  readonly socket: Socket;
  readonly address: string;
  /** The socket requests come on (the TLS socket under TLS); null before the first. */
  http: Socket | null;
  channel: boolean;
  inFlight: number;
  answered: number;
  /** performance.now() when its last response ended. */
  idleSince: number;
}

/**
 * Who counts as one client for the per-address cap: an IPv4 address (IPv4-mapped IPv6 too), or an IPv6 /64, which
 * one host or site gets whole (an address per connection costs such a client nothing).
 */
export function addressKey(remote: string | undefined): string {
  if (remote === undefined) return 'unknown';
  const address = remote.replace(/%.*$/, '').toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (mapped !== null) return mapped[1]!;
  if (!address.includes(':')) return address;
  const [head = '', tail] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(':')}::/64`;
}

/**
 * Holds the relay's connections to `limits`, so that idle keep-alive connections cannot lock channels out (seen:
 * 1,024 connections that each sent one GET /healthz held every slot for fastify's 72 s keep-alive):
 * - a connection gets the short keep-alive (OTHER_KEEP_ALIVE_MS, which the server must be built with) until it
 *   carries a channel's request, then the long one;
 * - a new connection over a limit (the total, or its address's) takes the slot of an idle one (no request in
 *   flight, at least one answered) from the same set: the longest idle first, a channel's last. Only when every
 *   connection there is busy is the new one closed unanswered. A request that was about to arrive on the idle
 *   connection closed was not read, so nothing of it happened: the client sends it again on a new connection.
 * Node's own `maxConnections` stays unset: it closes the new connection before any code sees it.
 */
export function guardConnections(server: Server, limits: ConnectionLimits): ConnectionGuard {
  const all = new Set<Connection>();
  const byAddress = new Map<string, Set<Connection>>();
  const bySocket = new WeakMap<Socket, Connection>();

  const forget = (c: Connection): void => {
    all.delete(c);
    const own = byAddress.get(c.address);
    own?.delete(c);
    if (own?.size === 0) byAddress.delete(c.address);
  };
  const close = (c: Connection, reason: ConnectionClosedReason): void => {
    forget(c);
    (c.http ?? c.socket).destroy();
    c.socket.destroy();
    limits.onClosed?.(reason);
  };
  /** Closes the idle connection of `among` that gives its slot most cheaply; false when every one is busy. */
  const closeIdle = (among: Iterable<Connection>): boolean => {
    let victim: Connection | null = null;
    for (const c of among) {
      if (c.inFlight > 0 || c.answered === 0) continue;
      if (victim === null || Number(c.channel) < Number(victim.channel) || (c.channel === victim.channel && c.idleSince < victim.idleSince)) victim = c;
    }
    if (victim === null) return false;
    close(victim, 'idle-for-new');
    return true;
  };

  server.on('connection', (socket: Socket) => {
    const c: Connection = { socket, address: addressKey(socket.remoteAddress), http: null, channel: false, inFlight: 0, answered: 0, idleSince: 0 };
    const own = byAddress.get(c.address) ?? new Set<Connection>();
    if (own.size >= limits.maxPerAddress && !closeIdle(own)) {
      socket.destroy();
      limits.onClosed?.('max-connections-per-address');
      return;
    }
    if (all.size >= limits.maxConnections && !closeIdle(all)) {
      socket.destroy();
      limits.onClosed?.('max-connections');
      return;
    }
    all.add(c);
    own.add(c);
    byAddress.set(c.address, own);
    bySocket.set(socket, c);
    socket.once('close', () => forget(c));
  });

  /** The connection a request came on: under TLS its socket wraps the TCP one (`_parent`, as Node's TLS server makes it). */
  const connectionOf = (req: IncomingMessage): Connection | undefined => {
    const socket = req.socket as Socket & { _parent?: Socket };
    return bySocket.get(socket) ?? (socket._parent === undefined ? undefined : bySocket.get(socket._parent));
  };

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const c = connectionOf(req);
    if (c === undefined) return;
    c.http = req.socket;
    c.inFlight++;
    // After Node's own 'finish' listener, which has just set the server's (short) keep-alive, plus a margin of its
    // own, if the connection stays open idle (the server sets no other socket timeout: fastify's connectionTimeout
    // is 0). A channel's connection gets the long one, with the same margin.
    res.once('finish', () => {
      const idleFor = c.http?.timeout ?? 0;
      if (c.channel && idleFor > 0) c.http!.setTimeout(idleFor - OTHER_KEEP_ALIVE_MS + CHANNEL_KEEP_ALIVE_MS);
    });
    res.once('close', () => {
      c.inFlight--;
      c.answered++;
      c.idleSince = performance.now();
    });
  });

  return {
    carriesChannel(req, res) {
      const c = connectionOf(req);
      if (c === undefined) return;
      c.channel = true;
      // The keep-alive the response advertises: Node writes it from this field (set from the server's) with the headers.
      (res as ServerResponse & { _keepAliveTimeout?: number })._keepAliveTimeout = CHANNEL_KEEP_ALIVE_MS;
    },
  };
}
