import net from 'node:net';

export interface RawReply {
  readonly status: number;
  readonly headers: string;
  readonly body: string;
}

/** Parses the first HTTP response in `text` (enough for the small JSON answers these tests read). */
export function parseRawReply(text: string): RawReply {
  const split = text.indexOf('\r\n\r\n');
  const head = split < 0 ? text : text.slice(0, split);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
  const rest = split < 0 ? '' : text.slice(split + 4);
  return { status, headers: head, body: length === undefined ? rest : Buffer.from(rest).subarray(0, Number(length)).toString() };
}

/** A client that writes `bytes` as given and collects whatever comes back until the server closes (or `waitMs`). */
export function rawExchange(url: string, bytes: string | Buffer, waitMs = 5_000): Promise<{ reply: RawReply; closedByServer: boolean; ms: number }> {
  const { hostname, port } = new URL(url);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let text = '';
    const timer = setTimeout(() => finish(false), waitMs);
    const finish = (closedByServer: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ reply: parseRawReply(text), closedByServer, ms: performance.now() - started });
    };
    socket.on('data', (d: Buffer) => (text += d.toString('utf8')));
    socket.on('close', () => finish(true));
    // A reset is the server closing too (it closed a connection it had not read: the kernel answers with RST).
    socket.on('error', (err: NodeJS.ErrnoException) => (text === '' && err.code !== 'ECONNRESET' && err.code !== 'EPIPE' ? reject(err) : finish(true)));
    socket.write(bytes);
  });
}
