import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** PEM files made at run time with openssl (nothing checked in that could expire). */
export interface Pki {
  readonly caCert: string;
  /** Server certificate for 127.0.0.1 and localhost, signed by the CA. */
  readonly serverCert: string;
  readonly serverKey: string;
  /** Client certificate signed by the CA (mutual TLS). */
  readonly clientCert: string;
  readonly clientKey: string;
  /** A second CA and a client certificate it signed: valid, but not trusted by the server. */
  readonly otherCaCert: string;
  readonly otherClientCert: string;
  readonly otherClientKey: string;
  /** Paths of the same files, for command-line flags. */
  readonly paths: Record<'caCert' | 'serverCert' | 'serverKey' | 'clientCert' | 'clientKey' | 'otherCaCert', string>;
}

const openssl = (args: string[], cwd: string) => execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });

function makeCa(dir: string, name: string): void {
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.crt`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
}

function makeLeaf(dir: string, ca: string, name: string, ext: string): void {
  openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=${name}`,
    '-keyout', `${name}.key`, '-out', `${name}.csr`], dir);
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-days', '2',
    '-extfile', `${name}.ext`, '-out', `${name}.crt`], dir);
}

export function makePki(dir: string): Pki {
  makeCa(dir, 'ca');
  makeCa(dir, 'otherca');
  makeLeaf(dir, 'ca', 'server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  makeLeaf(dir, 'ca', 'client', 'extendedKeyUsage=clientAuth\n');
  makeLeaf(dir, 'otherca', 'otherclient', 'extendedKeyUsage=clientAuth\n');
  const p = (f: string) => join(dir, f);
  const r = (f: string) => readFileSync(p(f), 'utf8');
  return {
    caCert: r('ca.crt'), serverCert: r('server.crt'), serverKey: r('server.key'), clientCert: r('client.crt'), clientKey: r('client.key'),
    otherCaCert: r('otherca.crt'), otherClientCert: r('otherclient.crt'), otherClientKey: r('otherclient.key'),
    paths: { caCert: p('ca.crt'), serverCert: p('server.crt'), serverKey: p('server.key'), clientCert: p('client.crt'), clientKey: p('client.key'), otherCaCert: p('otherca.crt') },
  };
}
