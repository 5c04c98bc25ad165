import * as E from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import { Status } from '../events/codecs.js';

/** The part of any guidgate reply the client reads (CONTRACT.md §2); other fields pass through. */
const ReplyBodyC = t.intersection([
  t.type({ code: t.string }),
  t.partial({ guid: t.string, message: t.string, field: t.string, originalCode: t.string }),
]);
export type ReplyBody = t.TypeOf<typeof ReplyBodyC> & Record<string, unknown>;

/** `text` parsed and decoded by `codec`, or null when it is not JSON or not of that shape. */
function decodeJson<A>(codec: t.Decoder<unknown, A>, text: string): A | null {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return null;
  }
  const decoded = codec.decode(json);
  return E.isRight(decoded) ? decoded.right : null;
}

/** A reply's JSON, or null when it is not contract-shaped (not JSON, not an object, no string `code`). */
export function decodeReplyBody(text: string): ReplyBody | null {
  return decodeJson(ReplyBodyC, text) as ReplyBody | null;
}

/** `GET /v1/transfers/{guid}`: the ledger row (never the request or its fingerprint). */
const TransferStatusC = t.intersection([
  t.type({
    guid: t.string,
    status: Status,
    code: t.union([t.string, t.null]),
    attempts: t.number,
    createdAt: t.number,
    updatedAt: t.number,
  }),
  t.partial({ response: t.union([t.string, t.null]) }),
]);
export type TransferStatus = t.TypeOf<typeof TransferStatusC> & Record<string, unknown>;

export function decodeTransferStatus(text: string): TransferStatus | null {
  return decodeJson(TransferStatusC, text) as TransferStatus | null;
}
