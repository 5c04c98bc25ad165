import * as E from 'fp-ts/lib/Either.js';
import type { EventLog } from '../events/store.js';
import type { LedgerState } from '../events/state.js';
import { keptContext, propagating, setAttributes, SpanKind, startSpan, type Context, type Tracing } from '../telemetry/tracing.js';

/**
 * The trace context a GUID's claim kept (its Claimed event: CONTRACT.md §10), so that a call made later for the same
 * transfer continues the trace of its first request. None kept (a claim written before it was, or by `Claim`), or the
 * stream not readable: a new trace, since a call is never held back for want of one.
 */
export async function claimContext(store: Pick<EventLog, 'readStream'>, guid: string): Promise<Context> {
  const events = await store.readStream(guid);
  if (E.isLeft(events)) return keptContext(undefined);
  const claimed = events.right.find((e) => e.type === 'Claimed');
  return keptContext(claimed?.type === 'Claimed' ? claimed.data.trace : undefined);
}

/**
 * One row of a settle run (`resolve`, the settler, `reprocess`) in a span of its own (`name`), a child of the row's
 * claim trace: `work` makes its calls under the context it is given, and the outcome it reports is the span's
 * `guidgate.decision`.
 */
export async function inRowSpan<O extends string>(
  deps: { readonly store: Pick<EventLog, 'readStream'>; readonly tracing?: Tracing | undefined },
  name: string,
  row: LedgerState,
  progressed: (outcome: O, detail?: string) => void,
  work: (trace: Context, progressed: (outcome: O, detail?: string) => void) => Promise<void>,
): Promise<void> {
  const parent = await claimContext(deps.store, row.guid);
  const { span, context } = startSpan(deps.tracing ?? propagating, name, SpanKind.INTERNAL, parent, { 'guidgate.guid': row.guid, 'guidgate.status': row.status, 'guidgate.attempt': row.attempts });
  try {
    await work(context, (outcome, detail) => {
      setAttributes(span, { 'guidgate.decision': outcome });
      progressed(outcome, detail);
    });
  } finally {
    span.end();
  }
}
