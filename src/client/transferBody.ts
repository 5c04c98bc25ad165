import { randomUUID } from 'node:crypto';
import * as E from 'fp-ts/lib/Either.js';
import { decodeTransferRequest } from '../contract/transferRequest.js';
import { InvalidRequestError } from './errors.js';

/** What a channel sends. Extra fields are forwarded untouched by the relay and are not part of the fingerprint. */
export interface TransferInput {
  /** Made with crypto.randomUUID() when absent. Keep it: a resend under another GUID is another transfer. */
  readonly guid?: string;
  readonly from: string;
  readonly to: string;
  /** Minor units (fen, cents). */
  readonly amount: number;
  readonly currency?: string;
  readonly [extra: string]: unknown;
}

/**
 * The GUID and the one serialisation of the body that every resend repeats byte for byte. Checked with the
 * relay's own decoder, so a request the relay would refuse with E400 is refused here, before anything is sent.
 */
export function serialiseTransfer(input: TransferInput, makeGuid: () => string = randomUUID): { guid: string; body: Buffer } {
  const { guid: given, ...rest } = input;
  const guid = given ?? makeGuid();
  let text: string;
  try {
    text = JSON.stringify({ guid, ...rest });
  } catch {
    throw new InvalidRequestError('body', 'the transfer cannot be written as JSON', typeof guid === 'string' ? guid : undefined);
  }
  const body = Buffer.from(text, 'utf8');
  const decoded = decodeTransferRequest(body, undefined);
  if (E.isLeft(decoded)) {
    throw new InvalidRequestError(decoded.left.field, decoded.left.message, typeof guid === 'string' ? guid : undefined);
  }
  return { guid: decoded.right.guid, body };
}
