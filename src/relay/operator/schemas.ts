import { EVENT_TYPES, STATUSES } from '../../events/codecs.js';
import { CATEGORIES } from '../../events/reconciliation.js';
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
  required: ['guid', 'row', 'blackHole', 'timeline'],
  properties: {
    guid: { type: 'string' },
    notifications: {
      type: 'array',
      description: 'the notifications to channels recorded for the GUID (CONTRACT.md §11), each with its delivery attempts',
      items: {
        type: 'object',
        properties: {
          webhookId: { type: 'string' }, type: { type: 'string', enum: ['transfer.settled', 'transfer.dead_letter'] }, state: { type: 'string', enum: ['pending', 'delivered', 'given_up'] },
          attempts: { type: 'integer', minimum: 0 }, recordedAt: { type: 'string' }, nextAttemptAt: nullable({ type: 'string' }), deliveredAt: nullable({ type: 'string' }), lastResult: nullable({ type: 'string' }),
          tries: { type: 'array', items: { type: 'object', properties: { at: ms, result: { type: 'string' }, httpStatus: nullable({ type: 'integer' }), detail: { type: 'string' }, latencyMs: { type: 'number' } } } },
        },
      },
    },
    row: operatorRow,
    blackHole: nullable({
      type: 'object',
      required: ['sent', 'absent', 'summary'],
      description: 'the row was sent again and again into silence: no send answered, none refused, every inquiry absent (an account system that accepts connections and never answers); null otherwise',
      properties: { sent: { type: 'integer', minimum: 2 }, absent: { type: 'integer', minimum: 1 }, summary: { type: 'string', examples: ['sent 5 times, every inquiry absent'] } },
    }),
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
            required: ['kind', 'at', 'key', 'code', 'fingerprintMatch', 'replayed'],
            properties: {
              kind: { const: 'request' },
              at: ms,
              key: nullable({ type: 'string' }),
              code: { type: 'string' },
              fingerprintMatch: { type: 'boolean' },
              replayed: { type: 'boolean', description: 'the row was DONE when the request arrived: it got the stored answer, nothing was sent for it' },
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
  required: ['statuses', 'oldest', 'deadLetters', 'blackHoles', 'breaker', 'replies'],
  properties: {
    notifications: {
      type: 'object',
      description: 'the notification outbox (CONTRACT.md §11): pending, delivered, given up, and when the oldest pending one was recorded',
      properties: { pending: { type: 'integer', minimum: 0 }, oldestPendingAt: nullable(ms), delivered: { type: 'integer', minimum: 0 }, givenUp: { type: 'integer', minimum: 0 } },
    },
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
      properties: {
        maxAttempts: { type: 'integer' },
        count: { type: 'integer', minimum: 0 },
        command: { type: 'string', description: "the command line that sends dead letters again with one attempt more, naming serve's ledger (without a password), account system, --timeout, --grace and --min-age: add the GUIDs (and --dry-run first)" },
      },
    },
    blackHoles: {
      type: 'object',
      required: ['count', 'guids', 'more'],
      description: 'dead letters sent every time into silence (each send unanswered, every inquiry absent): count, the first 20 GUIDs, and whether more than the 200 dead letters examined exist',
      properties: { count: { type: 'integer', minimum: 0 }, guids: { type: 'array', items: { type: 'string' } }, more: { type: 'boolean' } },
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
      description: 'replies to channels (the channel API\'s routes, guidgate_replies_total{route="channel"}); operator and console replies are not counted here',
      required: ['windowSeconds', 'perCode', 'perMinute'],
      properties: {
        windowSeconds: { type: 'integer' },
        perCode: { type: 'object', additionalProperties: { type: 'integer', minimum: 0 } },
        perMinute: {
          type: 'array',
          minItems: 60,
          maxItems: 60,
          description: "this process's replies to channels per code in each of the last 60 clock minutes, oldest first; the last is the minute in progress",
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

/** The reprocess action's body: the action's, and the attempt cap to send under (a dead letter sent again). */
export const reprocessBody = {
  ...actionBody,
  properties: {
    ...actionBody.properties,
    maxAttempts: { type: 'integer', minimum: 1, maximum: 1000, description: "send only while the row's attempts are below this; serve's --max-attempts unless given. Above it, a dead letter (FAILED at the cap) is sent again: the dead-letter runbook (docs/operating.md)", examples: [6] },
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

// Reconciliation runs (CONTRACT.md §8): the shapes of `reconcile --json`, with the run's id and time.

const breakCategory = { type: 'string', enum: CATEGORIES.filter((c) => c !== 'matched' && c !== 'pending') } as const;
const runId = { type: 'string', pattern: '^[1-9][0-9]{0,15}$', examples: ['1'] } as const;
const amount = { type: 'integer', description: 'minor units, written exactly whatever their size' } as const;
const counts = { type: 'object', required: [...CATEGORIES], additionalProperties: false, properties: Object.fromEntries(CATEGORIES.map((c) => [c, { type: 'integer', minimum: 0 }])) } as const;
const severities = { type: 'object', required: ['P1', 'P2'], additionalProperties: false, properties: { P1: { type: 'integer', minimum: 0 }, P2: { type: 'integer', minimum: 0 } } } as const;
const money = { type: 'array', items: { type: 'object', required: ['currency', 'amount'], additionalProperties: false, properties: { currency: nullable({ type: 'string' }), amount } } } as const;

export const reconciliationQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'string', pattern: '^[0-9]{1,3}$', description: 'runs per page, 1 to 500 (default 50)', examples: ['20'] },
    cursor: { ...runId, description: 'nextCursor of the page before' },
  },
} as const;

export const reconciliationBreaksQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'string', pattern: '^[0-9]{1,4}$', description: 'breaks per page, 1 to 5000 (default 1000)', examples: ['1000'] },
    after: { type: 'string', minLength: 1, maxLength: 128, description: 'nextAfter of the page before: the breaks after this GUID' },
  },
} as const;

export const reconciliationParams = {
  type: 'object',
  required: ['id'],
  additionalProperties: false,
  properties: { id: { ...runId, description: 'a run id from GET /v1/reconciliations' } },
} as const;

const runHeadProperties = {
  id: runId,
  recordedAt: ms,
  window: { type: 'object', required: ['from', 'to', 'pendingMs'], additionalProperties: false, properties: { from: ms, to: ms, pendingMs: { type: 'integer', minimum: 0 } } },
  source: { type: 'string', description: "the journal's file path or URL (without credentials)" },
  sha256: { type: 'string', pattern: '^[0-9a-f]{64}$', description: 'SHA-256 of every journal byte read' },
  counts: { ...counts, description: 'GUIDs per category' },
  severities,
  breakCount: { type: 'integer', minimum: 0 },
} as const;

export const reconciliationRun = {
  type: 'object',
  required: ['id', 'recordedAt', 'window', 'source', 'sha256', 'counts', 'severities', 'breakCount'],
  additionalProperties: false,
  properties: runHeadProperties,
} as const;

export const reconciliationPage = {
  type: 'object',
  required: ['runs', 'nextCursor'],
  additionalProperties: false,
  properties: {
    runs: { type: 'array', items: reconciliationRun, description: 'newest first' },
    nextCursor: nullable({ type: 'string', description: 'pass as cursor for the next (older) page; null on the last page' }),
  },
} as const;

const entry = {
  type: 'object',
  required: ['ref', 'from', 'to', 'amount', 'currency', 'appliedAt', 'line'],
  additionalProperties: false,
  properties: { ref: { type: 'string' }, from: { type: 'string', description: 'masked to its last 4 characters' }, to: { type: 'string' }, amount, currency: nullable({ type: 'string' }), appliedAt: ms, line: { type: 'integer', minimum: 1 } },
} as const;

export const reconciliationBreak = {
  type: 'object',
  required: ['guid', 'category', 'severity', 'differs', 'ledger', 'journal', 'firstSeen'],
  additionalProperties: false,
  properties: {
    guid: { type: 'string' },
    category: breakCategory,
    severity: { type: 'string', enum: ['P1', 'P2'] },
    differs: { type: 'array', items: { type: 'string', enum: ['from', 'to', 'amount', 'currency'] }, description: 'amount_mismatch: the terms that differ' },
    ledger: nullable({
      type: 'object',
      required: ['status', 'code', 'firstSentAt', 'from', 'to', 'amount', 'currency'],
      additionalProperties: false,
      properties: { status, code: nullable({ type: 'string' }), firstSentAt: ms, from: nullable({ type: 'string' }), to: nullable({ type: 'string' }), amount: nullable(amount), currency: nullable({ type: 'string' }) },
    }),
    journal: { type: 'array', items: entry, description: "every posting of the GUID the run read" },
    firstSeen: { ...runId, description: 'the run that first saw this break (still open since)' },
  },
} as const;

export const reconciliationDetail = {
  type: 'object',
  required: [...reconciliationRun.required, 'bytes', 'money', 'journal', 'ledgerRows', 'matchedWithoutTerms', 'breaks', 'nextAfter'],
  additionalProperties: false,
  properties: {
    ...runHeadProperties,
    bytes: { type: 'integer', minimum: 0 },
    money: { type: 'object', required: [...CATEGORIES], additionalProperties: false, properties: Object.fromEntries(CATEGORIES.map((c) => [c, { type: 'object', required: ['ledger', 'journal'], additionalProperties: false, properties: { ledger: money, journal: money } }])) },
    journal: { type: 'object', required: ['read', 'outsideRange', 'notJudged'], additionalProperties: false, properties: { read: { type: 'integer' }, outsideRange: { type: 'integer' }, notJudged: { type: 'integer' } } },
    ledgerRows: { type: 'integer', minimum: 0 },
    matchedWithoutTerms: { type: 'integer', minimum: 0 },
    noPosting: {
      type: 'object',
      description: 'GUIDs with no posting whose row does not say done 0000, in no category (not matched, not a break): rejected (B2xx, E500), unsettled (not settled); absent in runs recorded before it was counted',
      required: ['rejected', 'unsettled'],
      additionalProperties: false,
      properties: Object.fromEntries(['rejected', 'unsettled'].map((k) => [k, { type: 'object', required: ['count', 'ledger'], additionalProperties: false, properties: { count: { type: 'integer', minimum: 0 }, ledger: money } }])),
    },
    breaks: { type: 'array', items: reconciliationBreak, description: 'one page of the breaks, in GUID order (breakCount: how many in all)' },
    nextAfter: nullable({ type: 'string', description: 'pass as after for the next page of breaks; null on the last page' }),
  },
} as const;
