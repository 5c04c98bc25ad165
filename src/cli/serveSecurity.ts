import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import type { Command } from 'commander';
import * as E from 'fp-ts/lib/Either.js';
import type { ServeOptions } from '../wiring/serve.js';
import { openKeyRing } from '../relay/auth/keyRing.js';
import { flag } from './options.js';

/** `serve`'s keys and TLS flags (CONTRACT.md §6). */
export function addSecurityOptions(serve: Command): Command {
  return serve
    .addOption(flag('--keys <path>', 'keys file: every route but /healthz, /openapi.json and /console needs a Bearer token (made with `guidgate keys add`); SIGHUP re-reads it'))
    .addOption(flag('--insecure-open', 'allow serving without --keys on an address other than loopback (anyone who reaches the port can move money)'))
    .addOption(flag('--tls-cert <path>', 'serve HTTPS with this certificate (PEM; with --tls-key)'))
    .addOption(flag('--tls-key <path>', 'private key of --tls-cert (PEM)'))
    .addOption(flag('--tls-client-ca <path>', 'mutual TLS: only clients with a certificate this CA signed may connect'))
    .addOption(flag('--account-ca <path>', "CA certificates (PEM) an https:// account system's certificate must chain to, instead of the system's"));
}

export interface SecurityFlags {
  readonly host: string;
  readonly accountUrl?: string | undefined;
  readonly keys?: string;
  readonly insecureOpen?: boolean;
  readonly tlsCert?: string;
  readonly tlsKey?: string;
  readonly tlsClientCa?: string;
  readonly accountCa?: string;
}

/** 127.0.0.0/8, ::1 (also as an IPv4-mapped address) and `localhost`: only this machine can connect. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || /^(0{0,4}:){0,5}:?ffff:127\./.test(h) || h === '0:0:0:0:0:0:0:1';
  return false;
}

/**
 * Turns the flags into `serve` options, or a bad-usage message (exit 2). File contents never reach a message,
 * only their paths.
 */
export function securityOptions(o: SecurityFlags): E.Either<string, Pick<ServeOptions, 'keys' | 'tls' | 'accountCa'> & { warning?: string }> {
  const read = (what: string, path: string): E.Either<string, Buffer> => {
    try {
      return E.right(readFileSync(path));
    } catch (err) {
      return E.left(`${what}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  };
  let warning: string | undefined;
  let keys: ServeOptions['keys'];
  if (o.keys !== undefined) {
    const ring = openKeyRing(o.keys);
    if (E.isLeft(ring)) return E.left(`--keys: ${ring.left.message}`);
    keys = ring.right;
  } else if (!isLoopbackHost(o.host)) {
    if (o.insecureOpen !== true) return E.left(`refusing to serve without --keys on ${o.host}, which is not a loopback address: give --keys PATH, or --insecure-open if something in front of guidgate checks who calls`);
    warning = `warning: serving WITHOUT keys on ${o.host} (--insecure-open): anyone who can reach this port can move money and read every transfer`;
  }

  let tls: ServeOptions['tls'];
  if (o.tlsCert !== undefined || o.tlsKey !== undefined || o.tlsClientCa !== undefined) {
    if (o.tlsCert === undefined || o.tlsKey === undefined) return E.left('--tls-cert and --tls-key go together (and --tls-client-ca needs both)');
    const cert = read('--tls-cert', o.tlsCert);
    if (E.isLeft(cert)) return cert;
    const key = read('--tls-key', o.tlsKey);
    if (E.isLeft(key)) return key;
    const clientCa = o.tlsClientCa === undefined ? undefined : read('--tls-client-ca', o.tlsClientCa);
    if (clientCa !== undefined && E.isLeft(clientCa)) return clientCa;
    tls = { cert: cert.right, key: key.right, ...(clientCa === undefined ? {} : { clientCa: clientCa.right }) };
  }

  let accountCa: Buffer | undefined;
  if (o.accountCa !== undefined) {
    if (o.accountUrl === undefined || !o.accountUrl.startsWith('https:')) return E.left('--account-ca needs an https:// --account-url');
    const ca = read('--account-ca', o.accountCa);
    if (E.isLeft(ca)) return ca;
    accountCa = ca.right;
  }
  return E.right({
    ...(keys === undefined ? {} : { keys }),
    ...(tls === undefined ? {} : { tls }),
    ...(accountCa === undefined ? {} : { accountCa }),
    ...(warning === undefined ? {} : { warning }),
  });
}

/** `securityOptions`, with a bad usage ending the command (exit 2) and the open-mode warning on stderr. */
export function securityOptionsOrExit(cmd: Command, o: SecurityFlags): Pick<ServeOptions, 'keys' | 'tls' | 'accountCa'> {
  const result = securityOptions(o);
  if (E.isLeft(result)) return cmd.error(`guidgate: ${result.left}`, { exitCode: 2, code: 'guidgate.usage' });
  const { warning, ...options } = result.right;
  if (warning !== undefined) process.stderr.write(`${warning}\n`);
  return options;
}
