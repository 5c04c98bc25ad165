import { isDefiniteCode } from '../events/codecs.js';
import type { ReplyCode } from '../contract/codes.js';

/**
 * What a channel does with one reply to `POST /v1/transfers` (CONTRACT.md §2). The one table the client
 * follows and docs/channel-api.md prints.
 *
 * `maybeSent` says whether the reply leaves open that the transfer was applied: once any reply did, the
 * client never reports the transfer as failed, only as definite or unknown.
 */
export type ResendRule =
  | { readonly action: 'return'; readonly maybeSent: true }
  | { readonly action: 'resend'; readonly maybeSent: boolean }
  | { readonly action: 'refuse'; readonly maybeSent: false };

/** The codes `POST /v1/transfers` answers: every code of the registry but E409 (the operator API's actions only). */
export type RelayCode = Exclude<ReplyCode, 'E409'>;

export const RESEND_RULES: Readonly<Record<RelayCode, ResendRule>> = {
  // Sent, no answer yet: the transfer may be applied; the ledger settles it, so resend the same bytes later.
  E901: { action: 'resend', maybeSent: true },
  // In progress: the first attempt is still in flight; giving up now would leave a transfer half-known.
  E903: { action: 'resend', maybeSent: true },
  // Not sent (the account system could not be reached, or the breaker is open): resending is safe.
  E902: { action: 'resend', maybeSent: false },
  // Ledger unavailable: the account system was not called.
  E503: { action: 'resend', maybeSent: false },
  // The request itself is wrong, or not allowed: the same bytes would get the same answer.
  E400: { action: 'refuse', maybeSent: false },
  E401: { action: 'refuse', maybeSent: false },
  E403: { action: 'refuse', maybeSent: false },
  // Contract-shaped E404 on a POST: no such route (a wrong base URL); nothing was stored.
  E404: { action: 'refuse', maybeSent: false },
  E904: { action: 'refuse', maybeSent: false },
  E905: { action: 'refuse', maybeSent: false },
};

/** A definite answer: the account system's own body. */
const DEFINITE: ResendRule = { action: 'return', maybeSent: true };
/**
 * No reply (client timeout, reset, refused connection to the relay) or one the contract does not name (a
 * proxy's 502 page): the request may have reached the relay, which may have called the account system.
 */
export const NO_CLEAR_REPLY: ResendRule = { action: 'resend', maybeSent: true };

/**
 * The rule for a reply: its HTTP status and its JSON `code` (undefined when it had none). A definite code
 * counts only with HTTP 200, as the relay sends it.
 */
export function resendRuleFor(httpStatus: number, code: string | undefined): ResendRule {
  if (code === undefined) return NO_CLEAR_REPLY;
  if (isDefiniteCode(code)) return httpStatus === 200 ? DEFINITE : NO_CLEAR_REPLY;
  return Object.hasOwn(RESEND_RULES, code) ? RESEND_RULES[code as RelayCode] : NO_CLEAR_REPLY;
}
