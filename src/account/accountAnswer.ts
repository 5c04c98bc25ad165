/**
 * What an account-system answer means (CONTRACT.md §3): definite or not, and whether a 404 says "absent".
 * Pure functions over the status and the bytes, so the rules can be tested without a socket.
 */
import { isRight } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import { DefiniteCode } from '../events/codecs.js';
import { topLevelMembers } from '../json/topLevelMembers.js';

export type DefiniteAnswer = { ok: true; code: string; text: string } | { ok: false; detail: string };

const AnswerBody = t.type({ code: DefiniteCode });

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The body as text and JSON, or why it is neither. */
function parseJsonBody(bytes: Buffer): { ok: true; text: string; parsed: unknown } | { ok: false; detail: string } {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ok: false, detail: 'a body that is not valid UTF-8' };
  }
  try {
    return { ok: true, text, parsed: JSON.parse(text) };
  } catch {
    return { ok: false, detail: 'a body that is not JSON' };
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** How many times the top level of `text` (parsed JSON) gives `key`: parsers disagree on which of several counts. */
const timesGiven = (text: string, key: string): number => topLevelMembers(text).filter((m) => m.key === key).length;

/** A value from the answer, short enough for a log line and an event. */
const shown = (v: unknown): string => (typeof v === 'string' ? v.slice(0, 40) : (JSON.stringify(v)?.slice(0, 40) ?? String(v)));

/**
 * Why the answer's `guid` member rules it out as an answer about `guid`, or null when it does not. An answer
 * about another GUID (a core that mixed up its replies, a cache, a proxy answering from the wrong key) would
 * otherwise settle this transfer with another one's outcome and body. The contract does not require a 200 to
 * carry `guid` (only a 404 must name it), so an answer without one is judged by its code alone.
 */
function guidMismatch(text: string, parsed: Record<string, unknown>, guid: string): string | null {
  const times = timesGiven(text, 'guid');
  if (times === 0) return null;
  if (times > 1) return 'HTTP 200 with guid given more than once';
  const named = parsed['guid'];
  if (typeof named !== 'string') return `HTTP 200 with a guid that is not a string (${shown(named)})`;
  if (named !== guid) return `HTTP 200 about another GUID (${shown(named)})`;
  return null;
}

/**
 * A definite answer about `guid`: HTTP 200, UTF-8, a JSON object giving `code` once, that code definite, and a
 * `guid` member, if there is one, given once and equal to `guid`. `text` is the exact bytes as text.
 */
export function decodeDefinite(status: number, bytes: Buffer, guid: string): DefiniteAnswer {
  if (status !== 200) return { ok: false, detail: `HTTP ${status}` };
  const body = parseJsonBody(bytes);
  if (!body.ok) return { ok: false, detail: `HTTP 200 with ${body.detail}` };
  const { text, parsed } = body;
  if (timesGiven(text, 'code') > 1) return { ok: false, detail: 'HTTP 200 with code given more than once' };
  const decoded = AnswerBody.decode(parsed);
  if (!isRight(decoded)) {
    const code: unknown = isObject(parsed) ? parsed['code'] : undefined;
    if (code === undefined) return { ok: false, detail: 'HTTP 200 without a code' };
    return { ok: false, detail: `code ${shown(code)}` };
  }
  // AnswerBody accepted it, so it is an object.
  const mismatch = guidMismatch(text, parsed as Record<string, unknown>, guid);
  if (mismatch !== null) return { ok: false, detail: mismatch };
  return { ok: true, code: decoded.right.code, text };
}

/**
 * An inquiry's 404 means "no record" only when the account system itself says so about this GUID: a proxy, a
 * wrong base URL or an HTML error page also answer 404, and taking that for "absent" would allow a resend.
 */
export function namesGuid(bytes: Buffer, guid: string): boolean {
  const body = parseJsonBody(bytes);
  if (!body.ok || !isObject(body.parsed)) return false;
  return timesGiven(body.text, 'guid') === 1 && body.parsed['guid'] === guid;
}
