import { createHash } from 'node:crypto';
import * as E from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import { topLevelMembers } from '../json/topLevelMembers.js';

export const GUID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const ACCOUNT_PATTERN = /^[A-Za-z0-9-]{1,34}$/;
const CURRENCY_PATTERN = /^[A-Z]{3}$/;

const pattern = (name: string, re: RegExp) => t.refinement(t.string, (s) => re.test(s), name);

const Guid = pattern('Guid', GUID_PATTERN);
const Account = pattern('Account', ACCOUNT_PATTERN);
const Currency = pattern('Currency', CURRENCY_PATTERN);
const Amount = t.refinement(t.number, (n) => Number.isSafeInteger(n) && n >= 1, 'Amount');

/** The fields guidgate reads; everything else in the body is forwarded untouched and not fingerprinted. */
const TransferFields = t.intersection([
  t.type({ from: Account, to: Account, amount: Amount }),
  t.partial({ guid: Guid, currency: Currency }),
]);

const RULES: Record<string, string> = {
  guid: 'guid must be a string matching ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$',
  from: 'from must be a string of 1-34 characters [A-Za-z0-9-]',
  to: 'to must be a string of 1-34 characters [A-Za-z0-9-]',
  amount: 'amount must be an integer in minor units from 1 to 9007199254740991',
  currency: 'currency, when present, must be three capital letters',
};

export interface InvalidRequest {
  /** The field (or header) at fault, named in the reply's message. */
  readonly field: string;
  readonly message: string;
}

export interface TransferRequest {
  readonly guid: string;
  /** The bytes to forward: the original body, with `"guid":…,` inserted when the GUID came only in the header. */
  readonly body: string;
  readonly fingerprint: string;
  readonly from: string;
  readonly to: string;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** SHA-256 over the canonical JSON (sorted keys, no spaces) of the fields that identify a transfer. */
export function fingerprintOf(f: { guid: string; from: string; to: string; amount: number; currency?: string | undefined }): string {
  const canonical = JSON.stringify(
    f.currency === undefined
      ? { amount: f.amount, from: f.from, guid: f.guid, to: f.to }
      : { amount: f.amount, currency: f.currency, from: f.from, guid: f.guid, to: f.to },
  );
  return createHash('sha256').update(canonical).digest('hex');
}

/** The contract's fields: a body naming one of them twice is ambiguous (see duplicateField). */
const CONTRACT_FIELDS = new Set(['guid', 'from', 'to', 'amount', 'currency']);

/**
 * The first contract field that appears twice among the top-level keys of `text` (valid JSON, an object),
 * or null. JSON.parse keeps the last of duplicate keys; an account system may keep the first, and would then
 * apply a transfer under a GUID (or an amount) the ledger never saw.
 */
export function duplicateField(text: string): string | null {
  const seen = new Set<string>();
  for (const { key } of topLevelMembers(text)) {
    if (!CONTRACT_FIELDS.has(key)) continue;
    if (seen.has(key)) return key;
    seen.add(key);
  }
  return null;
}

const invalid = (field: string, message: string): E.Either<InvalidRequest, never> => E.left({ field, message });

/**
 * Decodes a channel's POST /v1/transfers: the raw bytes and the Idempotency-Key header. Nothing here
 * throws; every problem comes back naming its field.
 */
export function decodeTransferRequest(raw: Buffer, idempotencyKey: string | undefined): E.Either<InvalidRequest, TransferRequest> {
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    return invalid('body', 'body is not valid UTF-8');
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return invalid('body', 'body is not valid JSON');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return invalid('body', 'body must be a JSON object');
  const obj = json as Record<string, unknown>;
  const twice = duplicateField(text);
  if (twice !== null) return invalid(twice, `${twice} appears more than once in the body`);

  const decoded = TransferFields.decode(obj);
  if (E.isLeft(decoded)) {
    const field = decoded.left[0]?.context.map((c) => c.key).find((k) => k in RULES) ?? 'body';
    const present = field in obj;
    return invalid(field, present ? RULES[field]! : `${field} is required`);
  }
  const fields = decoded.right;
  if (fields.from === fields.to) return invalid('to', 'to must differ from from');

  let guid: string;
  let body = text;
  if (idempotencyKey !== undefined) {
    if (!GUID_PATTERN.test(idempotencyKey)) return invalid('Idempotency-Key', `Idempotency-Key: ${RULES['guid']!.slice(5)}`);
    if (fields.guid !== undefined && fields.guid !== idempotencyKey) {
      return invalid('Idempotency-Key', 'Idempotency-Key and guid differ');
    }
    if (fields.guid === undefined) {
      const brace = text.indexOf('{');
      // JSON.stringify is the identity on these characters, so the inserted bytes are exactly "guid":"…",
      body = `${text.slice(0, brace + 1)}"guid":${JSON.stringify(idempotencyKey)},${text.slice(brace + 1)}`;
    }
    guid = idempotencyKey;
  } else if (fields.guid !== undefined) {
    guid = fields.guid;
  } else {
    return invalid('guid', 'guid is required (in the body or the Idempotency-Key header)');
  }

  return E.right({
    guid,
    body,
    fingerprint: fingerprintOf({ guid, from: fields.from, to: fields.to, amount: fields.amount, currency: fields.currency }),
    from: fields.from,
    to: fields.to,
  });
}
