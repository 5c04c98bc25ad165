/** `guidgate/client`: a typed client for channels that resends the right way (docs/channel-api.md). */
export {
  createClient,
  type AttemptReport,
  type CallOptions,
  type ClientOptions,
  type DefiniteResult,
  type GuidgateClient,
  type TlsOptions,
  type TransferResult,
  type UnknownResult,
} from './createClient.js';
export type { BackoffOptions } from './backoff.js';
export type { ReplyBody, TransferStatus } from './codecs.js';
export {
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
export { RESEND_RULES, resendRuleFor, type RelayCode, type ResendRule } from './resendRule.js';
export type { TransferInput } from './transferBody.js';
