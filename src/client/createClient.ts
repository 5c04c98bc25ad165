import { Agent } from 'undici';
import { GUID_PATTERN } from '../contract/transferRequest.js';
import { fittingWait, MAX_PREFER_WAIT_S } from '../contract/preferWait.js';
import { backoffDelay, retryAfterMs, sleep, type BackoffOptions } from './backoff.js';
import { decodeReplyBody, decodeTransferStatus, type ReplyBody, type TransferStatus } from './codecs.js';
import {
  AuthError,
  GuidExpiredError,
  GuidgateClientError,
  GuidReusedError,
  InvalidRequestError,
  NotSentError,
  RouteNotFoundError,
  TransferAbortedError,
  UnexpectedReplyError,
} from './errors.js';
import { exchange, type Exchange } from './exchange.js';
import { NO_CLEAR_REPLY, resendRuleFor } from './resendRule.js';
import { serialiseTransfer, type TransferInput } from './transferBody.js';

export interface TlsOptions {
  /** CA certificate(s) the relay's certificate must chain to (default: the system's). */
  readonly ca?: string | Buffer | ReadonlyArray<string | Buffer>;
  /** Client certificate and key, for a relay that requires mutual TLS. */
  readonly cert?: string | Buffer;
  readonly key?: string | Buffer;
  readonly servername?: string;
}

export interface ClientOptions {
  /** The relay, e.g. `http://127.0.0.1:8080` (a path prefix is kept). */
  readonly baseUrl: string;
  /** Sent as `Authorization: Bearer …`; never logged nor put in an error. */
  readonly token?: string;
  /** One attempt, from sending to the last byte of the reply, in ms. */
  readonly timeout: number;
  /** How long `transfer` keeps resending, from the call, before it answers `unknown`, in ms. */
  readonly maxWait: number;
  /**
   * The most seconds (1–30) a resend of a GUID in progress waits at the relay for its outcome (`Prefer: wait`),
   * instead of an E903 at once. Default: what fits one attempt's `timeout` with a second to spare (`timeout` 5000 →
   * 4), at most 30; each attempt asks for no more than fits its own time left. `false`: never asked.
   */
  readonly wait?: number | false;
  readonly tls?: TlsOptions;
  readonly backoff?: BackoffOptions;
  /** Told about every attempt (for a channel's logs and metrics). */
  readonly onAttempt?: (report: AttemptReport) => void;
}

export interface AttemptReport {
  readonly guid: string;
  /** 1 for the first send. */
  readonly attempt: number;
  /** The reply's code, `HTTP <status>` for a reply without one, or `timeout` / `connection` / `aborted`. */
  readonly reply: string;
  readonly elapsedMs: number;
  /** The wait the reply's `Retry-After` asked for, in ms, when it had a valid one. */
  readonly retryAfterMs?: number;
}

/** The account system's answer (0000, B2xx, E500), as the relay stored it. */
export interface DefiniteResult {
  readonly status: 'definite';
  readonly guid: string;
  readonly code: string;
  /** The answer came from the ledger (`Idempotent-Replayed: true`): an earlier send was applied. */
  readonly replayed: boolean;
  /** The account system's body, byte for byte. */
  readonly body: string;
  readonly answer: ReplyBody;
  readonly attempts: number;
}

/**
 * The transfer may have been applied and nobody knows yet. NOT a failure: the relay settles it; send the same
 * transfer (same GUID) again later, or read `status(guid)`.
 */
export interface UnknownResult {
  readonly status: 'unknown';
  readonly guid: string;
  readonly attempts: number;
  /** As in AttemptReport.reply. */
  readonly lastReply: string;
}

export type TransferResult = DefiniteResult | UnknownResult;

export interface CallOptions {
  readonly signal?: AbortSignal;
}

export interface GuidgateClient {
  /**
   * Sends a transfer and resends the same bytes under the same GUID until the answer is definite or `maxWait`
   * has passed, never sooner than a reply's `Retry-After` allows. Rejects only when nothing was applied under this
   * call so far (InvalidRequestError, AuthError, GuidReusedError, RouteNotFoundError, NotSentError,
   * TransferAbortedError), or with GuidExpiredError (completed long ago). After NotSentError the transfer is still
   * open: resend the same GUID later, never a new one.
   */
  transfer(input: TransferInput, opts?: CallOptions): Promise<TransferResult>;
  /** The ledger row of a GUID, or null when the relay has none. */
  status(guid: string, opts?: CallOptions): Promise<TransferStatus | null>;
  close(): Promise<void>;
}

function positive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) throw new TypeError(`${name} must be a positive number of milliseconds`);
  return value;
}

/** The typed error for a refusing reply (RESEND_RULES' `refuse`). */
function refusal(code: string, reply: ReplyBody, guid: string): GuidgateClientError {
  const message = reply.message ?? code;
  switch (code) {
    case 'E400':
      return new InvalidRequestError(reply.field ?? 'body', message, guid);
    case 'E401':
    case 'E403':
      return new AuthError(code, message, guid);
    case 'E904':
      return new GuidReusedError(message, guid);
    case 'E905':
      return new GuidExpiredError(reply.originalCode, message, guid);
    default:
      return new RouteNotFoundError(message, guid);
  }
}

export function createClient(opts: ClientOptions): GuidgateClient {
  const timeout = positive('timeout', opts.timeout);
  const maxWait = positive('maxWait', opts.maxWait);
  const mostWait = opts.wait === undefined ? MAX_PREFER_WAIT_S : opts.wait;
  if (mostWait !== false && !(Number.isInteger(mostWait) && mostWait >= 1 && mostWait <= MAX_PREFER_WAIT_S)) {
    throw new TypeError(`wait must be whole seconds from 1 to ${MAX_PREFER_WAIT_S}, or false`);
  }
  const base = new URL(opts.baseUrl.endsWith('/') ? opts.baseUrl : `${opts.baseUrl}/`);
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new TypeError('baseUrl must be an http(s) URL');
  const tls = opts.tls;
  const agent = new Agent({
    // One request per socket at a time: undici re-dispatches requests pipelined behind a failed one.
    pipelining: 1,
    maxResponseSize: 1024 * 1024,
    ...(tls === undefined ? {} : { connect: { ...tls, ca: tls.ca as string | Buffer | Array<string | Buffer> } }),
  });
  const headers: Record<string, string> = { accept: 'application/json' };
  if (opts.token !== undefined) headers['authorization'] = `Bearer ${opts.token}`;
  const transfersUrl = new URL('v1/transfers', base);

  async function transfer(input: TransferInput, call: CallOptions = {}): Promise<TransferResult> {
    const { signal } = call;
    const { guid, body } = serialiseTransfer(input);
    if (signal?.aborted === true) throw new TransferAbortedError(guid);
    const started = Date.now();
    const deadline = started + maxWait;
    let attempts = 0;
    let maybeSent = false;
    let lastReply = '';
    let retryAt: Date | null = null;
    const unknown = (): UnknownResult => ({ status: 'unknown', guid, attempts, lastReply });

    for (;;) {
      attempts++;
      const attemptMs = Math.max(1, Math.min(timeout, deadline - Date.now()));
      // A resend of a GUID in progress waits at the relay for its outcome, within this attempt's time (a first send is unchanged).
      const preferWait = mostWait === false ? null : fittingWait(attemptMs, mostWait);
      const ex: Exchange = await exchange(agent, {
        method: 'POST',
        url: transfersUrl,
        headers: { ...headers, 'content-type': 'application/json', ...(preferWait === null ? {} : { prefer: `wait=${preferWait}` }) },
        body,
        timeoutMs: attemptMs,
        signal,
      });
      const reply = ex.kind === 'reply' ? decodeReplyBody(ex.text) : null;
      const asked = ex.kind === 'reply' ? retryAfterMs(ex.retryAfter, Date.now()) : null;
      lastReply = ex.kind === 'no-reply' ? ex.reason : (reply?.code ?? `HTTP ${ex.httpStatus}`);
      opts.onAttempt?.({ guid, attempt: attempts, reply: lastReply, elapsedMs: Date.now() - started, ...(asked === null ? {} : { retryAfterMs: asked }) });

      const rule = ex.kind === 'reply' ? resendRuleFor(ex.httpStatus, reply?.code) : NO_CLEAR_REPLY;
      if (ex.kind === 'reply' && reply !== null) {
        if (rule.action === 'return') {
          return { status: 'definite', guid, code: reply.code, replayed: ex.replayed, body: ex.text, answer: reply, attempts };
        }
        if (rule.action === 'refuse') {
          // After a reply that may have been applied, a refusal (a revoked key, …) cannot make it "failed".
          if (maybeSent && reply.code !== 'E905') return unknown();
          throw refusal(reply.code, reply, guid);
        }
      }
      maybeSent ||= rule.maybeSent;
      if (ex.kind === 'no-reply' && ex.reason === 'aborted') return unknown();

      // The relay's Retry-After (the breaker's cooldown, the row's own pace) is a floor under the backoff: resending
      // sooner would spend the transfer's attempts inside one short outage. One past the deadline ends the call now.
      const wait = Math.max(backoffDelay(attempts - 1, opts.backoff ?? {}), asked ?? 0);
      if (Date.now() + wait >= deadline) {
        const at = asked === null ? null : new Date(Date.now() + asked);
        retryAt = at !== null && Number.isFinite(at.getTime()) ? at : null;
        break;
      }
      if (!(await sleep(wait, signal))) {
        if (maybeSent) return unknown();
        throw new TransferAbortedError(guid);
      }
    }
    if (maybeSent) return unknown();
    throw new NotSentError(lastReply, attempts, guid, retryAt);
  }

  async function status(guid: string, call: CallOptions = {}): Promise<TransferStatus | null> {
    if (!GUID_PATTERN.test(guid)) throw new InvalidRequestError('guid', 'guid must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$', undefined);
    const ex = await exchange(agent, {
      method: 'GET',
      url: new URL(`v1/transfers/${encodeURIComponent(guid)}`, base),
      headers,
      timeoutMs: timeout,
      signal: call.signal,
    });
    if (ex.kind === 'no-reply') {
      if (ex.reason === 'aborted') throw new TransferAbortedError(guid);
      throw new UnexpectedReplyError(0, `no reply from the relay (${ex.reason})`, guid);
    }
    if (ex.httpStatus === 200) {
      const row = decodeTransferStatus(ex.text);
      if (row !== null) return row;
    }
    const reply = decodeReplyBody(ex.text);
    if (ex.httpStatus === 404 && reply?.code === 'E404') return null;
    if (reply?.code === 'E401' || reply?.code === 'E403') throw new AuthError(reply.code, reply.message ?? reply.code, guid);
    throw new UnexpectedReplyError(ex.httpStatus, `unexpected reply to GET /v1/transfers/{guid}: HTTP ${ex.httpStatus}`, guid);
  }

  return {
    transfer,
    status,
    close: () => agent.close(),
  };
}
