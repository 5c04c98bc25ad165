import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import type pg from 'pg';
import type { PgTls } from './postgresUrl.js';

/**
 * libpq's `sslmode` (CONTRACT.md §9 v4) on node-postgres, which reads `prefer`, `require` and `verify-ca` as
 * `verify-full` and has no fallback to a plain connection: what each connection is given, from the URL's settings.
 */

/** How one connection starts: `ssl` as node-postgres takes it, and whether a server that declines TLS is then spoken to plainly. */
export interface ConnectionTls {
  readonly ssl: false | ConnectionOptions;
  readonly plainIfDeclined: boolean;
}

/** libpq's file parameters read once (a pool's every connection uses them); an unreadable file names its parameter. */
export interface TlsFiles {
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
}

export function readTlsFiles(tls: PgTls): TlsFiles {
  const read = (name: string, path: string | null): string | undefined => {
    if (path === null) return undefined;
    try {
      return readFileSync(path, 'utf8');
    } catch (err) {
      throw new Error(`${name}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
  };
  const ca = read('sslrootcert', tls.rootCert);
  const cert = read('sslcert', tls.cert);
  const key = read('sslkey', tls.key);
  return { ...(ca === undefined ? {} : { ca }), ...(cert === undefined ? {} : { cert }), ...(key === undefined ? {} : { key }) };
}

/**
 * What a connection is given. `tlsAfterRefusal`: `allow` only, the server refused a plain connection, so TLS (as
 * libpq's second try). `require` with `sslrootcert` verifies the chain as `verify-ca` does (libpq's rule).
 */
export function connectionTls(tls: PgTls, files: TlsFiles, tlsAfterRefusal = false): ConnectionTls {
  const noVerify: ConnectionOptions = { ...files, rejectUnauthorized: false };
  const chainOnly: ConnectionOptions = { ...files, checkServerIdentity: () => undefined };
  switch (tls.mode) {
    case 'disable':
      return { ssl: false, plainIfDeclined: false };
    case 'allow':
      return tlsAfterRefusal ? { ssl: noVerify, plainIfDeclined: false } : { ssl: false, plainIfDeclined: false };
    case 'prefer':
      return { ssl: noVerify, plainIfDeclined: true };
    case 'require':
      return { ssl: files.ca === undefined ? noVerify : chainOnly, plainIfDeclined: false };
    case 'verify-ca':
      return { ssl: chainOnly, plainIfDeclined: false };
    case 'verify-full':
      return { ssl: { ...files }, plainIfDeclined: false };
  }
}

/** The parts of node-postgres's Connection this file reaches into (pg/lib/connection.js). */
interface PgConnection {
  ssl: unknown;
  stream: NodeJS.EventEmitter;
  connect(port: number | string, host?: string): void;
  attachListeners(stream: NodeJS.EventEmitter): void;
  emit(event: string): boolean;
}

const DECLINED = 0x4e; // 'N': the server's answer to an SSLRequest when it has no TLS

/**
 * libpq's `prefer` on one client, before it connects: the SSLRequest is sent; a server that answers `S` gets the
 * TLS handshake, one that answers `N` is then spoken to plainly on the same socket, as libpq does (node-postgres
 * alone fails the connection: "The server does not support SSL connections"). A TLS handshake that fails is not
 * retried plainly here (libpq's other fallback); the connection fails and the pool's next one tries again.
 */
export function plainIfDeclined(client: pg.Client): void {
  const con = (client as unknown as { connection: PgConnection }).connection;
  const connect = con.connect.bind(con);
  con.connect = (port, host) => {
    const stream = con.stream;
    const once = stream.once;
    // Connection.connect waits for the answer to its SSLRequest with stream.once('data'): that one listener is wrapped.
    stream.once = function wrapped(this: NodeJS.EventEmitter, event: string | symbol, listener: (...args: unknown[]) => void) {
      if (event !== 'data') return once.call(this, event, listener);
      stream.once = once;
      return once.call(this, 'data', (buffer: Buffer) => {
        if (buffer.length === 1 && buffer[0] === DECLINED) {
          con.ssl = false;
          (client as unknown as { ssl: unknown }).ssl = false;
          con.attachListeners(stream);
          // What node-postgres emits once TLS is up: the client sends its startup message on it.
          con.emit('sslconnect');
          return;
        }
        listener(buffer);
      });
    } as typeof stream.once;
    connect(port, host);
  };
}
