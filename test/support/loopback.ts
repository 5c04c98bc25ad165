import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/** A test's HTTP server listening on a free loopback port, its open connections tracked so that `close` ends them. */
export interface LoopbackServer {
  readonly url: string;
  /** Connections accepted so far. */
  accepted(): number;
  /** Destroys every open connection, then closes the server. */
  close(): Promise<void>;
}

export async function listenOnLoopback(server: Server): Promise<LoopbackServer> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  server.on('connection', (s: Socket) => {
    accepted++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    accepted: () => accepted,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
