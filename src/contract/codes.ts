/**
 * The one registry of reply codes (CONTRACT.md §2). Every reply guidgate makes uses one of these; a test
 * checks that docs/channel-api.md documents each, and no code that is not here.
 */
export const REPLY_CODES = {
  E400: { http: 400, message: 'invalid request' },
  E401: { http: 401, message: 'missing or unknown token' },
  E403: { http: 403, message: 'this key lacks the scope this route needs' },
  E404: { http: 404, message: 'no such transfer' },
  E409: { http: 409, message: 'not eligible: this transfer is not in a state this action applies to; nothing was done' },
  E503: { http: 503, message: 'ledger unavailable; the account system was not called' },
  E901: { http: 504, message: 'sent, outcome unknown; it will be settled by inquiry, do not change the request' },
  E902: { http: 503, message: 'not sent' },
  E903: { http: 409, message: 'in progress; resend later' },
  E904: { http: 422, message: 'GUID reused with a different request' },
  E905: { http: 410, message: 'GUID expired; the transfer was completed and its record purged' },
} as const;
export type ReplyCode = keyof typeof REPLY_CODES;

