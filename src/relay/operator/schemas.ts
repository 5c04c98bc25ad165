import { EVENT_TYPES, STATUSES } from '../../events/codecs.js';
import { ACCOUNT_PATTERN, CURRENCY_PATTERN, GUID_PATTERN } from '../../contract/transferRequest.js';

/**
 * The JSON schemas of the HTTP API (JSON Schema 2020-12, as OpenAPI 3.1 uses). The operator routes validate
 * their path, query and body with these (fastify route `schema`); `/openapi.json` is made from the routes as
 * registered (src/relay/openapi.ts), so the document cannot drift from what is validated. The reply schemas
 * are checked against real replies by test/e2e/operatorApi.e2e.spec.ts.
 */

export const EXAMPLE_GUID = 'TX-20261202-0001';

const guid = { type: 'string', pattern: GUID_PATTERN.source, maxLength: 128, examples: [EXAMPLE_GUID] } as const;
const ms = { type: 'integer', minimum: 0, description: 'milliseconds since the epoch' } as const;
const nullable = <T extends object>(s: T) => ({ anyOf: [s, { type: 'null' }] });
const status = { type: 'string', enum: [...STATUSES] } as const;

export const guidParams = {
  type: 'object',
  required: ['guid'],
  additionalProperties: false,
  properties: { guid },
} as const;

/** Every reply that is not a definite answer: E4xx, E5xx, E9xx (CONTRACT.md §2). */
export const errorReply = {
  type: 'object',
  required: ['code', 'message'],
  properties: {
    guid: { type: 'string' },
    code: { type: 'string', pattern: '^E[0-9]{3}$' },
    message: { type: 'string' },
    field: { type: 'string', description: 'E400: the field, header or parameter at fault' },
    originalCode: nullable({ type: 'string' }),
    reason: { type: 'string' },
  },
} as const;

/** The account system's definite answer, byte for byte (0000, B2xx, E500). */
export const definiteReply = {
  type: 'object',
  required: ['code'],
  properties: { guid: { type: 'string' }, code: { type: 'string', pattern: '^(0000|B2[0-9]{2}|E500)$' }, message: { type: 'string' } },
} as const;

export const transferBody = {
  type: 'object',
  required: ['from', 'to', 'amount'],
  description:
    'Read as raw bytes and decoded by the relay itself (CONTRACT.md §2), not by this schema: amount digits only, no case variants of ' +
    'these keys, no key twice. Other fields are forwarded untouched.',
  properties: {
    guid: { ...guid, description: 'required here or in the Idempotency-Key header' },
    from: { type: 'string', pattern: ACCOUNT_PATTERN.source },
    to: { type: 'string', pattern: ACCOUNT_PATTERN.source },
    amount: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
    currency: { type: 'string', pattern: CURRENCY_PATTERN.source },
  },
} as const;

/** A ledger row as the operator API shows it: never the request nor the fingerprint. Times in ms since the epoch. */
export const operatorRow = {
  type: 'object',
  required: ['guid', 'status', 'code', 'attempts', 'createdAt', 'updatedAt', 'sentAt', 'channel', 'failedByInquiry'],
  additionalProperties: false,
  properties: {
    guid: { type: 'string' },
    status,
    code: nullable({ type: 'string' }),
    failedByInquiry: { type: 'boolean', description: 'FAILED, and one of its attempts left: an inquiry said absent, or an older attempt was answered after it was sent again (StaleAnswer). Its code is still E902; a resend inquires first' },
    attempts: { type: 'integer', minimum: 0 },
    createdAt: ms,
    updatedAt: ms,
    sentAt: nullable(ms),
    channel: nullable({ type: 'string', description: 'the key that claimed it; null without keys' }),
  },
} as const;

/** `GET /v1/transfers/{guid}` (the channel API's view): the operator's row, and the last Sent's details. */
export const transferRow = {
  type: 'object',
  required: [...operatorRow.required, 'lastSeq', 'timeoutMs'],
  properties: {
    ...operatorRow.properties,
    lastSeq: { type: 'integer', minimum: 0 },
    timeoutMs: nullable({ type: 'integer', minimum: 0 }),
    response: nullable({ type: 'string', description: 'DONE only: the account system answer, as JSON text with every from/to (at any depth) masked to its last 4 characters; null if it is not JSON' }),
  },
} as const;

export const timeline = {
  type: 'object',
  required: ['guid', 'row', 'timeline'],
  properties: {
    guid: { type: 'string' },
    row: operatorRow,
    timeline: {
      type: 'array',
      items: {
        oneOf: [
          {
            type: 'object',
            required: ['kind', 'seq', 'type', 'at', 'data', 'actor'],
            properties: {
              kind: { const: 'event' },
              seq: { type: 'integer', minimum: 0 },
              type: {
                type: 'string',
                enum: [...EVENT_TYPES],
                description: 'StaleAnswer: a definite answer the row had moved past (no transition); attempt < currentAttempt means that attempt reached the account system after a later one was sent',
              },
              at: ms,
              data: {
                type: 'object',
                description: 'the event data; request and response as parsed JSON with account numbers masked; never the fingerprint',
              },
              actor: { description: 'who wrote the event (command or serve, host, pid, key); null when the event does not say' },
            },
          },
          {
            type: 'object',
            required: ['kind', 'at', 'key', 'code', 'fingerprintMatch'],
            properties: {
              kind: { const: 'request' },
              at: ms,
              key: nullable({ type: 'string' }),
              code: { type: 'string' },
              fingerprintMatch: { type: 'boolean' },
            },
          },
        ],
      },
    },
  },
} as const;

export const ledgerQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    status: { type: 'string', description: `comma-separated statuses, any case: ${STATUSES.join(', ')}`, examples: ['UNKNOWN,FAILED'] },
    olderThan: { type: 'string', description: 'only rows whose last change is older than this: 500ms, 30s, 5m, 2h, 7d', examples: ['30s'] },
    limit: { type: 'string', pattern: '^[0-9]{1,3}$', description: 'rows per page, 1 to 500 (default 50)', examples: ['50'] },
    cursor: { type: 'string', description: 'nextCursor of the page before' },
  },
} as const;

export const ledgerPage = {
  type: 'object',
  required: ['rows', 'nextCursor'],
  additionalProperties: false,
  properties: {
    rows: { type: 'array', items: operatorRow },
    nextCursor: nullable({ type: 'string', description: 'pass as cursor for the next page; null on the last page' }),
  },
} as const;

export const stats = {
  type: 'object',
  required: ['statuses', 'oldest', 'deadLetters', 'breaker', 'replies'],
  properties: {
    statuses: {
      type: 'object',
      required: [...STATUSES],
      additionalProperties: {
        type: 'object',
        required: ['count', 'oldestUpdatedAt'],
        properties: { count: { type: 'integer', minimum: 0 }, oldestUpdatedAt: nullable(ms) },
      },
    },
    oldest: {
      type: 'object',
      required: ['UNKNOWN', 'FAILED'],
      properties: { UNKNOWN: nullable(operatorRow), FAILED: nullable(operatorRow) },
    },
    deadLetters: {
      type: 'object',
      required: ['maxAttempts', 'count'],
      description: 'FAILED rows at the attempt cap: reprocess will not send them again',
      properties: { maxAttempts: { type: 'integer' }, count: { type: 'integer', minimum: 0 } },
    },
    breaker: {
      type: 'object',
      required: ['state'],
      properties: {
        state: { enum: ['off', 'closed', 'open'] },
        failuresInRow: { type: 'integer' },
        failuresToOpen: { type: 'integer' },
        cooldownMs: { type: 'integer' },
        trialAt: { ...ms, description: 'open: when one call is let through' },
      },
    },
    continuity: {
      type: 'object',
      required: ['state', 'breaks', 'lastBreak'],
      description: 'The continuity guard (CONTRACT.md §9): `window` while every GUID the ledger does not know is inquired about before its first send',
      properties: {
        state: { enum: ['off', 'watching', 'window'] },
        breaks: { type: 'integer', minimum: 0, description: 'times this relay saw the ledger go back since it started' },
        wentBackAt: { ...ms, description: 'window: when the ledger went back (the last time)' },
        endsAt: { ...ms, description: 'window: when the window ends' },
        lastBreak: nullable({ type: 'object', required: ['at', 'why'], properties: { at: ms, why: { type: 'string' } } }),
      },
    },
    replies: {
      type: 'object',
      required: ['windowSeconds', 'perCode', 'perMinute'],
      properties: {
        windowSeconds: { type: 'integer' },
        perCode: { type: 'object', additionalProperties: { type: 'integer', minimum: 0 } },
        perMinute: {
          type: 'array',
          minItems: 60,
          maxItems: 60,
          description: "this process's replies per code in each of the last 60 clock minutes, oldest first; the last is the minute in progress",
          items: { type: 'object', additionalProperties: { type: 'integer', minimum: 0 } },
        },
      },
    },
  },
} as const;

export const actionBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    dryRun: { type: 'boolean', description: 'list what would be done; inquire nothing, send nothing, change nothing' },
    minAge: { type: 'string', description: "the row's last Sent must be at least this old; serve's --min-age (60s unless set) is the default and the floor: a shorter one is E400 naming minAge, a longer one is allowed", examples: ['5m'] },
  },
} as const;

export const actionResult = {
  type: 'object',
  required: ['guid', 'dryRun', 'outcome', 'before', 'after'],
  additionalProperties: false,
  properties: {
    guid: { type: 'string' },
    dryRun: { type: 'boolean' },
    outcome: {
      type: 'string',
      description:
        'resolve: candidate (dry run), processed, absent, still-unknown, unreachable, skipped; ' +
        'reprocess: candidate (dry run), done, found, failed, unknown, held, withheld (its claim was acknowledged past the send window: not sent, the sweep settles it), skipped',
    },
    detail: { type: 'string' },
    before: operatorRow,
    after: operatorRow,
  },
} as const;

/** 409 E409: the row is not one this action applies to; nothing was done. */
export const notEligible = {
  ...errorReply,
  required: ['guid', 'code', 'message', 'before', 'after'],
  properties: { ...errorReply.properties, status, before: operatorRow, after: operatorRow },
} as const;
