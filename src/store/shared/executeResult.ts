import type { AppendResult, ExecuteResult } from '../../events/store.js';

/**
 * The result of an `execute` from the append of what `decide` returned. An append that lost (someone else moved
 * first: the log's (guid, seq) key, or the row's last seq, said so) is refused as `exists`, with the stream's state
 * as it is now: the answer a later claim of a taken GUID gets.
 */
export function executeResultOf(append: AppendResult): ExecuteResult {
  return append.won
    ? { kind: 'applied', state: append.state, events: append.events }
    : { kind: 'refused', refusal: { reason: 'exists', state: append.state } };
}
