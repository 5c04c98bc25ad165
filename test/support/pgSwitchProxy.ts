/**
 * A TCP forwarder with one address for a database whose server changes behind it: what a virtual IP, a DNS name or
 * a load balancer gives a relay across a failover (CONTRACT.md §9: "the same address now served by a promoted
 * standby"). Each new connection goes to the target in force when it arrives; `switchTo` changes the target for
 * new connections and cuts the ones open to the old one (as a dead server's connections end).
 */
import { connect, createServer, type Socket } from 'node:net';

export interface SwitchProxy {
  readonly port: number;
  /** `url` with its host and port replaced by the proxy's. */
  through(url: string): string;
  switchTo(port: number): void;
  close(): Promise<void>;
}

export async function startSwitchProxy(targetPort: number, host = '127.0.0.1'): Promise<SwitchProxy> {
  let target = targetPort;
  const open = new Set<{ client: Socket; upstream: Socket }>();
  const server = createServer((client) => {
    const upstream = connect(target, host);
    const pair = { client, upstream };
    open.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(pair);
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as { port: number }).port;
  const cutAll = () => {
    for (const { client, upstream } of open) {
      client.destroy();
      upstream.destroy();
    }
    open.clear();
  };
  return {
    port,
    through(url) {
      const u = new URL(url);
      u.hostname = host;
      u.port = String(port);
      return u.toString();
    },
    switchTo(p) {
      target = p;
      cutAll();
    },
    async close() {
      cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
