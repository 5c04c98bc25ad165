import { createHmac } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import * as E from 'fp-ts/lib/Either.js';
import { Agent, request } from 'undici';
import { retryDelayMs, type DeliveryOutcome, type StoredNotification } from '../events/notifications.js';
import type { LedgerClock, NotificationOutbox } from '../events/store.js';

/** What a notifier needs of the ledger: the outbox and its clock. */
export type NotifierStore = NotificationOutbox & LedgerClock;

export interface NotifierOptions {
  readonly url: string;
  /** The secret as the file holds it, less one trailing newline (`notifySecret`). */
  readonly secret: Buffer;
  /** One attempt's deadline: connect, headers and body together. */
  readonly timeoutMs: number;
  /** How long after it was recorded a notification is tried before it is given up. */
  readonly forMs: number;
  /** CA certificates (PEM) for an https:// receiver instead of the system's. */
  readonly ca?: Buffer | undefined;
  /** This process's name in the leases (`host:pid:…`). */
  readonly holder: string;
  /** Attempts in flight at once (default 4): a slow receiver costs this many sockets, nothing else. */
  readonly concurrency?: number;
  /** How often the outbox is looked at when the last look found nothing due (default 1 s). */
  readonly pollEveryMs?: number;
  /** Told of each attempt's outcome once it is recorded (metrics). */
  readonly onOutcome?: (o: DeliveryOutcome) => void;
  /** Told when the outbox could not be read or written. */
  readonly onStoreError?: (message: string) => void;
}

export interface Notifier {
  /** Looks at the outbox now rather than at the next tick. */
  kick(): void;
  /** Stops leasing; waits for the attempts in flight and records them. */
  stop(): Promise<void>;
}

/** The Standard Webhooks signature of one attempt: `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`. */
export function webhookSignature(secret: Buffer, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', secret).update(`${id}.${timestamp}.${body}`, 'utf8').digest('base64')}`;
}

/** The signing secret as `--notify-secret-file` holds it: its bytes, less one trailing newline (no `whsec_` decoding). */
export function notifySecret(file: Buffer): Buffer {
  if (file.length > 0 && file[file.length - 1] === 0x0a) return file.subarray(0, file.length - 1);
  return file;
}

/** The shortest secret accepted (CONTRACT.md §11). */
export const MIN_SECRET_BYTES = 24;

/** The most of a receiver's reply that is read (and thrown away) to keep its connection reusable. */
const MAX_REPLY_BYTES = 16 * 1024;

/** One attempt: POST, no redirect followed (undici's request follows none), a 2xx is delivered. */
async function attempt(agent: Agent, opts: NotifierOptions, n: StoredNotification, signal: AbortSignal): Promise<{ httpStatus: number | null; detail: string; ok: boolean }> {
  const id = `${n.guid}:${n.seq}`;
  const timestamp = Math.floor(Date.now() / 1000);
  try {
    const res = await request(opts.url, {
      method: 'POST',
      dispatcher: agent,
      signal,
      headers: {
        'content-type': 'application/json',
        'webhook-id': id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': webhookSignature(opts.secret, id, timestamp, n.body),
        'user-agent': 'guidgate-notify',
      },
      body: n.body,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
    });
    await res.body.dump({ limit: MAX_REPLY_BYTES }).catch(() => undefined);
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    const location = res.headers['location'];
    const detail = ok ? 'delivered' : res.statusCode >= 300 && res.statusCode < 400 ? `redirect not followed${typeof location === 'string' ? ` (to ${location.slice(0, 200)})` : ''}` : 'not a 2xx';
    return { httpStatus: res.statusCode, detail, ok };
  } catch (err) {
    const e = err as { code?: string; name?: string; message?: string };
    const reason = signal.reason as unknown;
    const detail = !signal.aborted ? (e.code ?? e.name ?? 'error') : reason instanceof Error && reason.message === 'relay stopping' ? 'cut short: the relay was stopping' : `no answer within ${opts.timeoutMs} ms`;
    return { httpStatus: null, detail, ok: false };
  }
}

/**
 * `serve --notify-url`: delivers the outbox's due notifications (CONTRACT.md §11). A page of due ones is leased at a
 * time (no two relays hold one at once; memory stays one page however long the backlog), sent on an agent of its own
 * with `concurrency` sockets at most and a deadline each, so a receiver that is down, slow or holding connections
 * costs the relay's channel replies and account calls nothing; the outcomes of a page are recorded in one write.
 */
export function startNotifier(store: NotifierStore, opts: NotifierOptions): Notifier {
  const concurrency = Math.max(1, opts.concurrency ?? 4);
  const pageSize = concurrency * 4;
  const pollEveryMs = opts.pollEveryMs ?? 1000;
  // Long enough for a page sent `concurrency` at a time, each at most the timeout, and the write after it.
  const leaseMs = (pageSize / concurrency + 1) * opts.timeoutMs + 30_000;
  const agent = new Agent({
    connections: concurrency,
    pipelining: 1,
    connect: { timeout: opts.timeoutMs, ...(opts.ca === undefined ? {} : { ca: opts.ca }) },
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    keepAliveTimeout: 4_000,
  });
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  /** The attempts in flight: `stop` cuts them short (recorded as failed, tried again later) so that shutdown is not held. */
  const inFlight = new Set<AbortController>();

  async function deliverPage(): Promise<boolean> {
    const leased = await store.leaseNotifications(opts.holder, pageSize, leaseMs);
    if (E.isLeft(leased)) {
      opts.onStoreError?.(leased.left.message);
      return false;
    }
    const page = leased.right;
    if (page.length === 0) return false;
    const clock = await store.now();
    const ledgerStart = E.isRight(clock) ? clock.right : Date.now();
    const monoStart = performance.now();
    const outcomes: DeliveryOutcome[] = [];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < page.length && !stopped) {
        const n = page[next++]!;
        const controller = new AbortController();
        inFlight.add(controller);
        const deadline = setTimeout(() => controller.abort(), opts.timeoutMs);
        const started = performance.now();
        const at = Math.round(ledgerStart + (started - monoStart));
        const r = await attempt(agent, opts, n, controller.signal);
        clearTimeout(deadline);
        inFlight.delete(controller);
        const latencyMs = performance.now() - started;
        const result = r.ok ? 'delivered' : at + latencyMs - n.createdAt >= opts.forMs ? 'given_up' : 'failed';
        const nextAt = result === 'failed' ? Math.round(at + latencyMs + retryDelayMs(n.attempts + 1)) : null;
        outcomes.push({ guid: n.guid, seq: n.seq, at, result, httpStatus: r.httpStatus, detail: r.detail, latencyMs, nextAt, holder: opts.holder });
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, page.length) }, worker));
    const recorded = await store.recordDeliveries(outcomes);
    if (E.isLeft(recorded)) {
      opts.onStoreError?.(recorded.left.message);
      return false;
    }
    for (const o of outcomes) opts.onOutcome?.(o);
    // A full page of which some got through: more may be due now. A receiver that took none waits for the next tick,
    // so a backlog behind a receiver that is down costs a page a tick, not a loop.
    return page.length === pageSize && outcomes.some((o) => o.result === 'delivered') && !stopped;
  }

  async function run(): Promise<void> {
    try {
      while (await deliverPage());
    } catch (err) {
      opts.onStoreError?.(err instanceof Error ? err.message : String(err));
    }
  }

  function tick(): void {
    timer = null;
    if (stopped) return;
    if (running === null) {
      running = run().finally(() => {
        running = null;
        if (!stopped) timer = setTimeout(tick, pollEveryMs);
      });
    }
  }
  timer = setTimeout(tick, 0);

  return {
    kick() {
      if (stopped || running !== null) return;
      if (timer !== null) clearTimeout(timer);
      tick();
    },
    async stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      for (const c of inFlight) c.abort(new Error('relay stopping'));
      // The attempts in flight finish or time out; what they did is recorded before the ledger closes.
      await running;
      await agent.close().catch(() => undefined);
    },
  };
}
