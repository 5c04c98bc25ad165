/**
 * Maps whatever an undici call to the account system threw into FAILED (certain that no byte of the
 * request was written, so it may be sent again) or UNKNOWN (it may have arrived and been applied).
 *
 * The account system is not idempotent, so a wrong FAILED can move money twice, while a wrong UNKNOWN
 * only costs an inquiry. Every doubt therefore resolves to UNKNOWN:
 *  - codes that only the connect phase can produce (ECONNREFUSED, DNS, undici's connect timeout, TLS
 *    certificate verification) are FAILED on their own;
 *  - codes that the connect phase AND an established socket can produce (ETIMEDOUT, EHOSTUNREACH, …, ERR_SSL_*)
 *    are FAILED only with evidence that they came from connect: `syscall` 'connect'/'getaddrinfo', an
 *    AggregateError of such errors (happy eyeballs), or the caller stating the request was never written;
 *  - if anything in the cause chain says UNKNOWN, the answer is UNKNOWN, whatever else it holds;
 *  - anything unrecognised is UNKNOWN/non-definite.
 * A request written to a keep-alive socket that the server had already closed surfaces as ECONNRESET,
 * EPIPE or UND_ERR_SOCKET: UNKNOWN, because nothing proves the server did not read and process it.
 */
import type { CallFailedReason, CallUnknownReason } from '../events/codecs.js';

export type FailedReason = CallFailedReason;
export type UnknownReason = CallUnknownReason;

export type FailureClass =
  | { outcome: 'FAILED'; reason: FailedReason; detail: string } // certain that no byte of the request was written
  | { outcome: 'UNKNOWN'; reason: UnknownReason; detail: string }; // it may have arrived

/** What the caller knows about the request's progress, if anything. */
export interface ClassifyContext {
  /**
   * false: the client knows the request was never handed to a socket (it was still queued or connecting), which
   * counts as evidence for the connect phase. true: it may have been written, so the answer is never FAILED.
   * Absent: judge from the error alone.
   */
  readonly requestWritten?: boolean;
}

/** How a rule recognises an error object in the chain. */
export type RuleMatch = 'code' | 'code-prefix' | 'name';

export type FailureRule =
  /** FAILED whenever the code is seen: only the connect phase can produce it. */
  | { readonly match: RuleMatch; readonly key: string; readonly outcome: 'FAILED'; readonly reason: FailedReason; readonly phase: 'any' }
  /** FAILED only with evidence of the connect phase; else UNKNOWN with `otherwise`. */
  | {
      readonly match: RuleMatch;
      readonly key: string;
      readonly outcome: 'FAILED';
      readonly reason: FailedReason;
      readonly phase: 'connect';
      readonly otherwise: UnknownReason;
    }
  | { readonly match: RuleMatch; readonly key: string; readonly outcome: 'UNKNOWN'; readonly reason: UnknownReason };

/** The classification table. Order matters only for prefix rules (first match wins per error object). */
export const FAILURE_RULES: readonly FailureRule[] = [
  // ---- FAILED: nothing left the process --------------------------------------------------------------
  // TCP RST answering our SYN: the connection never existed (an established socket reports ECONNRESET instead).
  { match: 'code', key: 'ECONNREFUSED', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // undici's connect timer runs only from socket creation to 'connect'/'secureConnect', before any request is written.
  { match: 'code', key: 'UND_ERR_CONNECT_TIMEOUT', outcome: 'FAILED', reason: 'connect-timeout', phase: 'any' },
  // Node's happy-eyeballs per-attempt connect timeout: raised only while connecting.
  { match: 'code', key: 'ERR_SOCKET_CONNECTION_TIMEOUT', outcome: 'FAILED', reason: 'connect-timeout', phase: 'any' },
  // DNS: name does not exist; resolution happens before a socket is even opened.
  { match: 'code', key: 'ENOTFOUND', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // DNS: temporary resolver failure, before any socket exists.
  { match: 'code', key: 'EAI_AGAIN', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // DNS: non-recoverable resolver failure, before any socket exists.
  { match: 'code', key: 'EAI_FAIL', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // DNS: name or service not known, before any socket exists.
  { match: 'code', key: 'EAI_NONAME', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // DNS: no address for the name, before any socket exists.
  { match: 'code', key: 'EAI_NODATA', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: server certificate fails hostname check; verification happens only in the handshake, before the request.
  { match: 'code-prefix', key: 'ERR_TLS_CERT_', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: handshake did not finish in time; the request is written only after 'secureConnect'.
  { match: 'code', key: 'ERR_TLS_HANDSHAKE_TIMEOUT', outcome: 'FAILED', reason: 'connect-timeout', phase: 'any' },
  // TLS certificate verification failures (OpenSSL X509 codes): handshake only.
  { match: 'code', key: 'CERT_HAS_EXPIRED', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: certificate not yet valid; handshake only.
  { match: 'code', key: 'CERT_NOT_YET_VALID', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: certificate revoked; handshake only.
  { match: 'code', key: 'CERT_REVOKED', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: certificate not trusted; handshake only.
  { match: 'code', key: 'CERT_UNTRUSTED', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: certificate rejected; handshake only.
  { match: 'code', key: 'CERT_REJECTED', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: certificate signature invalid; handshake only.
  { match: 'code', key: 'CERT_SIGNATURE_FAILURE', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: self-signed leaf certificate; handshake only.
  { match: 'code', key: 'DEPTH_ZERO_SELF_SIGNED_CERT', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: self-signed certificate in the chain; handshake only.
  { match: 'code', key: 'SELF_SIGNED_CERT_IN_CHAIN', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: issuer certificate unavailable; handshake only.
  { match: 'code', key: 'UNABLE_TO_GET_ISSUER_CERT', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: issuer certificate not found locally; handshake only.
  { match: 'code', key: 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // TLS: leaf signature cannot be verified; handshake only.
  { match: 'code', key: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', outcome: 'FAILED', reason: 'refused', phase: 'any' },
  // Kernel connect timeout (SYN unanswered); the same code on an established socket means retransmits gave up: UNKNOWN.
  { match: 'code', key: 'ETIMEDOUT', outcome: 'FAILED', reason: 'connect-timeout', phase: 'connect', otherwise: 'timeout' },
  // No route to host at connect; on an established socket (ICMP mid-stream) the request may have arrived.
  { match: 'code', key: 'EHOSTUNREACH', outcome: 'FAILED', reason: 'refused', phase: 'connect', otherwise: 'reset' },
  // Network unreachable at connect; mid-stream the request may have arrived.
  { match: 'code', key: 'ENETUNREACH', outcome: 'FAILED', reason: 'refused', phase: 'connect', otherwise: 'reset' },
  // Network down at connect; mid-stream the request may have arrived.
  { match: 'code', key: 'ENETDOWN', outcome: 'FAILED', reason: 'refused', phase: 'connect', otherwise: 'reset' },
  // Host down at connect; mid-stream the request may have arrived.
  { match: 'code', key: 'EHOSTDOWN', outcome: 'FAILED', reason: 'refused', phase: 'connect', otherwise: 'reset' },
  // No local address/port to bind the connect to; anywhere else it is unexplained.
  { match: 'code', key: 'EADDRNOTAVAIL', outcome: 'FAILED', reason: 'refused', phase: 'connect', otherwise: 'non-definite' },
  // OpenSSL handshake failures (wrong version, no shared cipher, alert); after the handshake (bad record MAC…) UNKNOWN.
  { match: 'code-prefix', key: 'ERR_SSL_', outcome: 'FAILED', reason: 'refused', phase: 'connect', otherwise: 'reset' },
  // Generic protocol error, usually a TLS handshake failure; after the handshake it may follow our request.
  { match: 'code', key: 'EPROTO', outcome: 'FAILED', reason: 'refused', phase: 'connect', otherwise: 'reset' },

  // ---- UNKNOWN: the request may have been read and applied -----------------------------------------
  // No response headers within headersTimeout after the request was written.
  { match: 'code', key: 'UND_ERR_HEADERS_TIMEOUT', outcome: 'UNKNOWN', reason: 'timeout' },
  // Response body stalled longer than bodyTimeout: the server has already answered something.
  { match: 'code', key: 'UND_ERR_BODY_TIMEOUT', outcome: 'UNKNOWN', reason: 'timeout' },
  // Peer sent RST after we wrote, including a stale keep-alive socket: it may have read the request first.
  { match: 'code', key: 'ECONNRESET', outcome: 'UNKNOWN', reason: 'reset' },
  // Write to a socket the peer closed; earlier bytes (or the whole request) may have been read.
  { match: 'code', key: 'EPIPE', outcome: 'UNKNOWN', reason: 'reset' },
  // Connection aborted locally after it was established.
  { match: 'code', key: 'ECONNABORTED', outcome: 'UNKNOWN', reason: 'reset' },
  // undici "other side closed"/"closed": FIN or close while our request was in flight (stale keep-alive too).
  { match: 'code', key: 'UND_ERR_SOCKET', outcome: 'UNKNOWN', reason: 'reset' },
  // Stream closed before completion.
  { match: 'code', key: 'ERR_STREAM_PREMATURE_CLOSE', outcome: 'UNKNOWN', reason: 'reset' },
  // Dispatcher was closed; we cannot tell from the error where the request was.
  { match: 'code', key: 'UND_ERR_CLOSED', outcome: 'UNKNOWN', reason: 'non-definite' },
  // Dispatcher was destroyed, possibly mid-request.
  { match: 'code', key: 'UND_ERR_DESTROYED', outcome: 'UNKNOWN', reason: 'non-definite' },
  // undici request aborted (signal/deadline): possibly after the request was written.
  { match: 'code', key: 'UND_ERR_ABORTED', outcome: 'UNKNOWN', reason: 'timeout' },
  // undici abort base class: same as above.
  { match: 'code', key: 'UND_ERR_ABORT', outcome: 'UNKNOWN', reason: 'timeout' },
  // Node's AbortError (AbortSignal): possibly after the request was written.
  { match: 'code', key: 'ABORT_ERR', outcome: 'UNKNOWN', reason: 'timeout' },
  // DOMException/Error named AbortError (numeric or no code): possibly after the request was written.
  { match: 'name', key: 'AbortError', outcome: 'UNKNOWN', reason: 'timeout' },
  // AbortSignal.timeout() reason: possibly after the request was written.
  { match: 'name', key: 'TimeoutError', outcome: 'UNKNOWN', reason: 'timeout' },
  // undici informational socket error ("aborted" socket teardown).
  { match: 'code', key: 'UND_ERR_INFO', outcome: 'UNKNOWN', reason: 'non-definite' },
  // Malformed HTTP response (llhttp): the server received something and answered garbage.
  { match: 'code-prefix', key: 'HPE_', outcome: 'UNKNOWN', reason: 'non-definite' },
  // Response shorter/longer than its content-length: the server answered.
  { match: 'code', key: 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH', outcome: 'UNKNOWN', reason: 'non-definite' },
  // Response larger than allowed: the server answered.
  { match: 'code', key: 'UND_ERR_RES_EXCEEDED_MAX_SIZE', outcome: 'UNKNOWN', reason: 'non-definite' },
  // Response headers too large: the server answered.
  { match: 'code', key: 'UND_ERR_HEADERS_OVERFLOW', outcome: 'UNKNOWN', reason: 'non-definite' },
];

/** syscalls that can only fail before a request is written. */
const CONNECT_SYSCALLS: ReadonlySet<string> = new Set(['connect', 'getaddrinfo', 'getnameinfo', 'queryA', 'queryAaaa']);

const MAX_NODES = 32;

interface ErrNode {
  readonly value: unknown;
  readonly code: string | undefined;
  readonly name: string | undefined;
  readonly syscall: string | undefined;
  readonly message: string | undefined;
  readonly children: readonly unknown[];
}

function prop(value: unknown, key: string): unknown {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return undefined;
  try {
    return (value as Record<string, unknown>)[key];
  } catch {
    return undefined; // hostile getters must not turn a classification into a crash
  }
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}

function toNode(value: unknown): ErrNode {
  const children: unknown[] = [];
  const cause = prop(value, 'cause');
  if (cause !== undefined && cause !== null) children.push(cause);
  const errors = prop(value, 'errors'); // AggregateError (happy eyeballs) carries one error per address
  if (Array.isArray(errors)) children.push(...errors);
  return {
    value,
    code: str(prop(value, 'code')),
    name: str(prop(value, 'name')),
    syscall: str(prop(value, 'syscall')),
    message: str(prop(value, 'message')),
    children,
  };
}

/** Breadth-first over cause / errors, outermost first, cycle-safe and bounded. */
function walk(err: unknown): ErrNode[] {
  const out: ErrNode[] = [];
  const seen = new Set<unknown>();
  const queue: unknown[] = [err];
  while (queue.length > 0 && out.length < MAX_NODES) {
    const value = queue.shift();
    if (value === undefined || value === null || seen.has(value)) continue;
    seen.add(value);
    const node = toNode(value);
    out.push(node);
    queue.push(...node.children);
  }
  return out;
}

function ruleFor(node: ErrNode): FailureRule | undefined {
  for (const rule of FAILURE_RULES) {
    if (rule.match === 'code' && node.code === rule.key) return rule;
    if (rule.match === 'code-prefix' && node.code?.startsWith(rule.key) === true) return rule;
    if (rule.match === 'name' && node.name === rule.key) return rule;
  }
  return undefined;
}

/** Does this error object itself show it came from connecting? (AggregateError: every member with a code does.) */
function connectEvidence(node: ErrNode): boolean {
  if (node.syscall !== undefined) return CONNECT_SYSCALLS.has(node.syscall);
  const members = node.children.map(toNode).filter((n) => n.code !== undefined);
  if (Array.isArray(prop(node.value, 'errors')) && members.length > 0) {
    return members.every((m) => m.syscall !== undefined && CONNECT_SYSCALLS.has(m.syscall));
  }
  return false;
}

function describe(node: ErrNode): string {
  const parts: string[] = [];
  if (node.code !== undefined) parts.push(node.code);
  else if (node.name !== undefined) parts.push(node.name);
  if (node.syscall !== undefined) parts.push(`(${node.syscall})`);
  if (node.message !== undefined) parts.push(node.message);
  if (parts.length === 0) {
    try {
      return `non-error value: ${String(node.value)}`.slice(0, 200);
    } catch {
      return 'non-error value';
    }
  }
  return parts.join(' ').slice(0, 300);
}

export function classifyFailure(err: unknown, ctx: ClassifyContext = {}): FailureClass {
  const nodes = walk(err);
  let firstFailed: FailureClass | undefined;
  let firstUnknown: FailureClass | undefined;

  for (const node of nodes) {
    const rule = ruleFor(node);
    if (rule === undefined) continue;
    let verdict: FailureClass;
    if (rule.outcome === 'UNKNOWN') {
      verdict = { outcome: 'UNKNOWN', reason: rule.reason, detail: describe(node) };
    } else if (rule.phase === 'any' || ctx.requestWritten === false || connectEvidence(node)) {
      verdict = { outcome: 'FAILED', reason: rule.reason, detail: describe(node) };
    } else {
      verdict = { outcome: 'UNKNOWN', reason: rule.otherwise, detail: `${describe(node)} (not provably during connect)` };
    }
    if (verdict.outcome === 'UNKNOWN') firstUnknown ??= verdict;
    else firstFailed ??= verdict;
  }

  // Any sign that the request may have arrived outweighs every sign that it did not.
  if (firstUnknown !== undefined) return firstUnknown;
  if (firstFailed !== undefined) {
    if (ctx.requestWritten === true) {
      const reason: UnknownReason = firstFailed.reason === 'connect-timeout' ? 'timeout' : 'reset';
      return { outcome: 'UNKNOWN', reason, detail: `${firstFailed.detail} (after the request was handed to the socket)` };
    }
    return firstFailed;
  }
  const outer = nodes[0];
  return { outcome: 'UNKNOWN', reason: 'non-definite', detail: outer === undefined ? `unrecognised: ${String(err)}` : `unrecognised: ${describe(outer)}` };
}
