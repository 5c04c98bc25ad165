import * as t from 'io-ts';
import { isLeft } from 'fp-ts/lib/Either.js';

/**
 * How the simulator treats a `POST /transfer`:
 * - `answer`: wait `latencyMs`, apply, answer normally.
 * - `late-answer`: apply at once, answer only after `lateMs` (meant to outlast the relay's timeout).
 * - `reset`: wait `latencyMs`, apply, then reset the connection without answering.
 * - `hold`: never apply, never answer; the socket stays open until the client gives up or the simulator closes.
 * - `garbage`: wait `latencyMs`, do NOT apply, answer HTTP 502 with a non-JSON body.
 * - `e500`: wait `latencyMs`, do NOT apply, answer HTTP 200 `{"code":"E500",...}`.
 */
export const FaultModeC = t.keyof({
  answer: null,
  'late-answer': null,
  reset: null,
  hold: null,
  garbage: null,
  e500: null,
});
export type FaultMode = t.TypeOf<typeof FaultModeC>;

export interface Faults {
  /** Default behaviour for POSTs. */
  mode: FaultMode;
  /** Per-GUID override of `mode` (wins over `byGuidPrefix`). Replaced wholesale by a patch. */
  byGuid: Record<string, FaultMode>;
  /** Per-GUID-prefix override of `mode`; the longest matching prefix wins. Replaced wholesale by a patch. */
  byGuidPrefix: Record<string, FaultMode>;
  /**
   * 0..1: fraction of POSTs whose mode comes from the default `mode` and is `answer` that are answered E500
   * without applying. GUID/prefix overrides are never turned into E500 by the rate.
   */
  e500Rate: number;
  /** Seed of the PRNG behind `e500Rate`; setting it re-seeds. */
  seed: number;
  /** After a GUID is processed, an inquiry for it answers 404 until this long has passed (the min-age trap). */
  processingMs: number;
  /** How long `late-answer` waits before answering. */
  lateMs: number;
  /**
   * An action, not a state: setting it (> 0) at run time makes the server stop listening for that many ms
   * (connections are refused), then listen again on the same port. Always reads 0 in the current faults.
   * Ignored in the start-up options.
   */
  refuseForMs: number;
}

export const DEFAULT_FAULTS: Readonly<Faults> = Object.freeze({
  mode: 'answer',
  byGuid: {},
  byGuidPrefix: {},
  e500Rate: 0,
  seed: 1,
  processingMs: 0,
  lateMs: 10_000,
  refuseForMs: 0,
});

const NonNegativeInt = t.refinement(t.number, (n) => Number.isSafeInteger(n) && n >= 0, 'NonNegativeInt');
const SafeInt = t.refinement(t.number, (n) => Number.isSafeInteger(n), 'SafeInt');
const Rate = t.refinement(t.number, (n) => Number.isFinite(n) && n >= 0 && n <= 1, 'Rate');

const FaultsPatchC = t.partial({
  mode: FaultModeC,
  byGuid: t.record(t.string, FaultModeC),
  byGuidPrefix: t.record(t.string, FaultModeC),
  e500Rate: Rate,
  seed: SafeInt,
  processingMs: NonNegativeInt,
  lateMs: NonNegativeInt,
  refuseForMs: NonNegativeInt,
});
// The codec and the hand-written interface must agree.
type PatchFromCodec = t.TypeOf<typeof FaultsPatchC>;
const _agree: (p: PatchFromCodec) => Partial<Faults> = (p) => p;
void _agree;

const FAULT_KEYS = new Set(Object.keys(FaultsPatchC.props));

export type DecodeResult<T> = { ok: true; value: T } | { ok: false; field: string; message: string };

/** Decodes a control body (already JSON-parsed) into a partial Faults; names the first bad field. */
export function decodeFaultsPatch(input: unknown): DecodeResult<Partial<Faults>> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { ok: false, field: '(body)', message: 'body must be a JSON object' };
  }
  for (const key of Object.keys(input)) {
    if (!FAULT_KEYS.has(key)) return { ok: false, field: key, message: `unknown field: ${key}` };
  }
  const decoded = FaultsPatchC.decode(input);
  if (isLeft(decoded)) {
    const err = decoded.left[0];
    const path =
      err === undefined
        ? '(body)'
        : err.context
            .slice(1)
            .map((c) => c.key)
            .filter((k) => k !== '')
            .join('.') || '(body)';
    return { ok: false, field: path, message: `invalid field: ${path}` };
  }
  return { ok: true, value: decoded.right };
}

/** Merges a patch over the current faults; top-level keys replace, `refuseForMs` is never stored. */
export function mergeFaults(base: Faults, patch: Partial<Faults>): Faults {
  const next: Faults = { ...base, byGuid: { ...base.byGuid }, byGuidPrefix: { ...base.byGuidPrefix } };
  if (patch.mode !== undefined) next.mode = patch.mode;
  if (patch.byGuid !== undefined) next.byGuid = { ...patch.byGuid };
  if (patch.byGuidPrefix !== undefined) next.byGuidPrefix = { ...patch.byGuidPrefix };
  if (patch.e500Rate !== undefined) next.e500Rate = patch.e500Rate;
  if (patch.seed !== undefined) next.seed = patch.seed;
  if (patch.processingMs !== undefined) next.processingMs = patch.processingMs;
  if (patch.lateMs !== undefined) next.lateMs = patch.lateMs;
  next.refuseForMs = 0;
  return next;
}

/** The explicit override for a GUID, if any: exact GUID first, then the longest matching prefix. */
export function overrideFor(faults: Faults, guid: string): FaultMode | undefined {
  const exact = Object.hasOwn(faults.byGuid, guid) ? faults.byGuid[guid] : undefined;
  if (exact !== undefined) return exact;
  let best: { len: number; mode: FaultMode } | undefined;
  for (const [prefix, mode] of Object.entries(faults.byGuidPrefix)) {
    if (guid.startsWith(prefix) && (best === undefined || prefix.length > best.len)) {
      best = { len: prefix.length, mode };
    }
  }
  return best?.mode;
}

/** mulberry32: a tiny seedable PRNG, returns floats in [0, 1). */
export function makePrng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let r = Math.imul(a ^ (a >>> 15), 1 | a);
    r = (r + Math.imul(r ^ (r >>> 7), 61 | r)) ^ r;
    return ((r ^ (r >>> 14)) >>> 0) / 4294967296;
  };
}
