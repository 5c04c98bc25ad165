import { request, type Dispatcher } from 'undici';

/** One HTTP exchange with the relay: a reply, or none. */
export type Exchange =
  | {
      readonly kind: 'reply';
      readonly httpStatus: number;
      readonly text: string;
      readonly replayed: boolean;
      /** The reply's `Retry-After` header(s), as sent. */
      readonly retryAfter: string | readonly string[] | undefined;
    }
  /** `aborted`: the caller's signal; `timeout`: the attempt's own deadline; `connection`: anything else. */
  | { readonly kind: 'no-reply'; readonly reason: 'timeout' | 'connection' | 'aborted'; readonly detail: string };

export interface ExchangeSpec {
  readonly method: 'GET' | 'POST';
  readonly url: URL;
  readonly headers: Record<string, string>;
  readonly body?: Buffer;
  /** The whole exchange, from dispatch to the last byte of the reply. */
  readonly timeoutMs: number;
  readonly signal: AbortSignal | undefined;
}

/** Never throws: every failure is a `no-reply` value. Nothing here sends twice (undici never retries a POST). */
export async function exchange(dispatcher: Dispatcher, spec: ExchangeSpec): Promise<Exchange> {
  const deadline = AbortSignal.timeout(spec.timeoutMs);
  const signal = spec.signal === undefined ? deadline : AbortSignal.any([spec.signal, deadline]);
  try {
    const res = await request(spec.url, {
      dispatcher,
      method: spec.method,
      headers: spec.headers,
      ...(spec.body === undefined ? {} : { body: spec.body }),
      signal,
      headersTimeout: spec.timeoutMs,
      bodyTimeout: spec.timeoutMs,
    });
    const text = await res.body.text();
    return {
      kind: 'reply',
      httpStatus: res.statusCode,
      text,
      replayed: res.headers['idempotent-replayed'] === 'true',
      retryAfter: res.headers['retry-after'],
    };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const timedOut = deadline.aborted || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT';
    const reason = spec.signal?.aborted === true ? 'aborted' : timedOut ? 'timeout' : 'connection';
    return { kind: 'no-reply', reason, detail: typeof code === 'string' ? code : err instanceof Error ? err.name : 'error' };
  }
}
