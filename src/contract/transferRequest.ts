import { hash } from 'node:crypto';
import * as E from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import { topLevelMembers } from '../json/topLevelMembers.js';
import { lookalikeOf } from './fieldLookalike.js';

export const GUID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
export const ACCOUNT_PATTERN = /^[A-Za-z0-9-]{1,34}$/;
export const CURRENCY_PATTERN = /^[A-Z]{3}$/;

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
  amount: 'amount must be an integer in minor units from 1 to 9007199254740991, written as digits only',
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

/**
 * Is this Content-Type header `application/json` (any letter case, parameters such as `charset=utf-8` allowed)?
 * Anything else is refused: a browser on another site can send text/plain or a form without asking first.
 */
export function isJsonMediaType(header: string | undefined): boolean {
  if (header === 'application/json') return true; // what nearly every channel sends: no split, no copies
  return header !== undefined && header.split(';', 1)[0]!.trim().toLowerCase() === 'application/json';
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** SHA-256 over the canonical JSON (sorted keys, no spaces) of the fields that identify a transfer. */
export function fingerprintOf(f: { guid: string; from: string; to: string; amount: number; currency?: string | undefined }): string {
  const canonical = JSON.stringify(
    f.currency === undefined
      ? { amount: f.amount, from: f.from, guid: f.guid, to: f.to }
      : { amount: f.amount, currency: f.currency, from: f.from, guid: f.guid, to: f.to },
  );
  // The one-shot hash: no Hash object per request.
  return hash('sha256', canonical, 'hex');
}

/** The contract's fields (see topLevelFieldProblem). */
const CONTRACT_FIELDS = new Set(['guid', 'from', 'to', 'amount', 'currency']);

const ASCII_KEY = /^[\x00-\x7f]*$/;

/** An amount as the contract writes it: digits only, so every parser reads the same integer. */
const AMOUNT_SPELLING = /^[0-9]+$/;

/**
 * The first problem among the top-level members of `text` (valid JSON, an object) that JSON.parse hides, or
 * null. Each is a way for the account system's parser to read another transfer than the one fingerprinted:
 *  - a contract field given twice: JSON.parse keeps the last, another parser may keep the first;
 *  - a key equal to a contract field but for letter case (`Amount`), Unicode case included (`guıd`, `GUİD`), or
 *    NFKC (`ｇｕｉｄ`): a case-insensitive or normalising parser reads it (see lookalikeOf);
 *  - an amount not written as digits (`1.0`, `1e2`, `1500.0000000000001`): JSON.parse rounds it to an
 *    integer, while the account system gets the text as written.
 */
export function topLevelFieldProblem(text: string): InvalidRequest | null {
  const seen = new Set<string>();
  for (const { key, raw } of topLevelMembers(text)) {
    if (!CONTRACT_FIELDS.has(key)) {
      const field = lookalikeOf(key, CONTRACT_FIELDS);
      if (field !== null) return { field: key, message: `${key} differs from the contract field ${field} only in letter case${ASCII_KEY.test(key) ? '' : ' or Unicode form'}` };
      continue;
    }
    if (seen.has(key)) return { field: key, message: `${key} appears more than once in the body` };
    seen.add(key);
    if (key === 'amount' && !AMOUNT_SPELLING.test(raw)) return { field: 'amount', message: RULES['amount']! };
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
  const problem = topLevelFieldProblem(text);
  if (problem !== null) return E.left(problem);

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
