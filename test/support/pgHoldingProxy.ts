/**
 * A TCP proxy in front of PostgreSQL that forwards every byte, and can hold back one transaction's acknowledgement:
 * armed with a marker (a GUID), the first connection that sends a COMMIT after a message carrying the marker in the
 * same transaction gets its COMMIT forwarded (the server commits it), and from then on nothing the server sends on
 * that connection reaches the client until `release()`. What a partition between a relay and its database, a
 * stalled synchronous standby, or a frozen relay does to a commit: done on the server, not known to the relay.
 *
 * It reads the client's side of the protocol only as far as needed: the untyped startup messages, then typed messages
 * (a byte, a length), of which a simple Query whose text is COMMIT ends a transaction (node-postgres sends BEGIN and
 * COMMIT that way).
 */
import { createServer, connect, type Socket } from 'node:net';

const SSL_REQUEST = 80877103;
const GSS_REQUEST = 80877104;

export interface HoldingProxy {
  readonly port: number;
  /** `url` with its host and port replaced by the proxy's. */
  through(url: string): string;
  /** Hold the acknowledgement of the next COMMIT of a transaction that carried `marker` (one at a time). */
  arm(marker: string): Hold;
  close(): Promise<void>;
}

export interface Hold {
  /** Resolves once the armed COMMIT was forwarded and its acknowledgement is being held. */
  readonly holding: Promise<void>;
  /** Lets the held bytes through (if the client is still connected), or disarms if nothing was held yet. */
  release(): void;
}

export async function startHoldingProxy(target: { host: string; port: number }): Promise<HoldingProxy> {
  let marker: Buffer | null = null;
  let held: Array<() => void> = [];
  let holding = false;
  let markHolding = (): void => {};
  const sockets = new Set<Socket>();

  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    sockets.add(client);
    sockets.add(upstream);
    let pending = Buffer.alloc(0);
    let startup = true;
    let sawMarker = false;
    let hold = false;
    const heldHere: Buffer[] = [];

    const fromClient = (chunk: Buffer): void => {
      pending = Buffer.concat([pending, chunk]);
      let forwardUpTo = 0;
      let holdAfterThis = false;
      for (;;) {
        if (startup) {
          if (pending.length - forwardUpTo < 8) break;
          const len = pending.readInt32BE(forwardUpTo);
          if (pending.length - forwardUpTo < len) break;
          const code = pending.readInt32BE(forwardUpTo + 4);
          if (code !== SSL_REQUEST && code !== GSS_REQUEST) startup = false;
          forwardUpTo += len;
          continue;
        }
        if (pending.length - forwardUpTo < 5) break;
        const type = String.fromCharCode(pending[forwardUpTo]!);
        const len = pending.readInt32BE(forwardUpTo + 1);
        if (pending.length - forwardUpTo < 1 + len) break;
        const body = pending.subarray(forwardUpTo + 5, forwardUpTo + 1 + len);
        forwardUpTo += 1 + len;
        if (marker !== null && body.includes(marker)) sawMarker = true;
        if (type === 'Q') {
          const text = body.toString('utf8').replace(/\0$/, '').trim().toUpperCase();
          if (text === 'COMMIT' && sawMarker && marker !== null && !holding) {
            holdAfterThis = true;
            break;
          }
          if (text === 'BEGIN' || text === 'COMMIT' || text === 'ROLLBACK') sawMarker = false;
        }
      }
      upstream.write(pending.subarray(0, forwardUpTo));
      pending = pending.subarray(forwardUpTo);
      if (holdAfterThis) {
        hold = true;
        holding = true;
        marker = null;
        held.push(() => {
          hold = false;
          if (!client.destroyed) for (const b of heldHere.splice(0)) client.write(b);
        });
        markHolding();
        if (pending.length > 0) fromClient(Buffer.alloc(0));
      }
    };
    client.on('data', fromClient);
    upstream.on('data', (chunk: Buffer) => {
      if (hold) heldHere.push(chunk);
      else client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end);
    upstream.on('close', () => {
      // A held connection's server side may close (its session ended): the client hears of it only on release.
      if (!hold) end();
    });
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;

  return {
    port,
    through(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    arm(m) {
      marker = Buffer.from(m, 'utf8');
      const seen = new Promise<void>((resolve) => (markHolding = resolve));
      return {
        holding: seen,
        release() {
          marker = null;
          for (const letGo of held.splice(0)) letGo();
          holding = false;
        },
      };
    },
    async close() {
      for (const s of sockets) s.destroy();
      held = [];
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
