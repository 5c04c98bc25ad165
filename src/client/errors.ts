/**
 * The errors `client.transfer` and `client.status` reject with. Callers match on `code` (as with undici's
 * errors). A rejected `transfer` means nothing was applied under this call so far; `NotSentError` leaves the
 * transfer open (resend the same GUID later), and `GuidExpiredError` says the GUID was completed long ago and its
 * record purged. Messages never hold the token or the body.
 */
export class GuidgateClientError extends Error {
  override readonly name: string = 'GuidgateClientError';
  constructor(
    readonly code: string,
    message: string,
    /** The GUID the call was about, when there was one. */
    readonly guid: string | undefined,
  ) {
    super(message);
  }
}

/** E400: the request is invalid (found by the client before sending, or answered by the relay). */
export class InvalidRequestError extends GuidgateClientError {
  override readonly name = 'InvalidRequestError';
  constructor(
    /** The field (or header) at fault. */
    readonly field: string,
    message: string,
    guid: string | undefined,
  ) {
    super('E400', message, guid);
  }
}

/** E401 (no or unknown token) or E403 (the token lacks the scope). */
export class AuthError extends GuidgateClientError {
  override readonly name = 'AuthError';
  constructor(code: 'E401' | 'E403', message: string, guid: string | undefined) {
    super(code, message, guid);
  }
}

/** E904: the GUID is held by a different request; nothing was sent or changed. */
export class GuidReusedError extends GuidgateClientError {
  override readonly name = 'GuidReusedError';
  constructor(message: string, guid: string) {
    super('E904', message, guid);
  }
}

/** E905: NOT a failure: the GUID was completed (`originalCode`) and its record purged. */
export class GuidExpiredError extends GuidgateClientError {
  override readonly name = 'GuidExpiredError';
  constructor(
    readonly originalCode: string | undefined,
    message: string,
    guid: string,
  ) {
    super('E905', message, guid);
  }
}

/** E404 on a POST: the relay has no such route (check `baseUrl`); nothing was stored. */
export class RouteNotFoundError extends GuidgateClientError {
  override readonly name = 'RouteNotFoundError';
  constructor(message: string, guid: string | undefined) {
    super('E404', message, guid);
  }
}

/**
 * `maxWait` ran out, or the relay asked to wait past it (`Retry-After`), and every reply said the transfer was not
 * sent (E902, E503): nothing was applied SO FAR. It is not a failure of the transfer: the relay may hold it open
 * under this GUID (a FAILED row), and an operator's `guidgate reprocess` may still send it. Resend the same
 * transfer under the same GUID later (not before `retryAt` when the relay named a time); never under a new GUID,
 * which would be a second transfer and may debit twice.
 */
export class NotSentError extends GuidgateClientError {
  override readonly name = 'NotSentError';
  constructor(
    /** The last reply's code. */
    readonly lastCode: string,
    readonly attempts: number,
    guid: string,
    /** When the relay's last `Retry-After` allows the next resend; null when it named no time. */
    readonly retryAt: Date | null = null,
  ) {
    const when = retryAt === null ? 'later' : `later (not before ${retryAt.toISOString()})`;
    super(
      lastCode,
      `not sent so far (${attempts} attempt(s), last reply ${lastCode}): nothing has been applied yet, but the transfer stays open ` +
        `under GUID ${guid} and may still be sent by an operator's reprocess; resend the same GUID ${when}, never a new one`,
      guid,
    );
  }
}

/** Cancelled through the AbortSignal before anything could have been applied. */
export class TransferAbortedError extends GuidgateClientError {
  override readonly name = 'TransferAbortedError';
  constructor(guid: string | undefined) {
    super('ABORTED', 'cancelled before the transfer could have been applied', guid);
  }
}

/** `status()` got a reply the contract does not name, or none (timeout, connection error). */
export class UnexpectedReplyError extends GuidgateClientError {
  override readonly name = 'UnexpectedReplyError';
  constructor(
    /** HTTP status, or 0 when there was no reply. */
    readonly httpStatus: number,
    message: string,
    guid: string | undefined,
  ) {
    super('UNEXPECTED', message, guid);
  }
}
