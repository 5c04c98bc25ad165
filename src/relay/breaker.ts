import type { CallPermit } from '../send/sendClaimed.js';
import type { Metrics } from '../telemetry/metrics.js';

export interface BreakerOptions {
  /** Calls in a row that ended FAILED or UNKNOWN before the breaker opens; 0 turns it off. */
  readonly failures: number;
  readonly cooldownMs: number;
  readonly clock: () => number;
  readonly metrics?: Pick<Metrics, 'breaker' | 'breakerTripped'> | undefined;
  /** Where its opening and closing are said (warn: an operator must see both; a trial that fails again is not said). */
  readonly log?: { warn(line: Record<string, unknown>, message: string): void } | undefined;
}

/** What the operator API shows of the breaker (`GET /v1/stats`). */
export type BreakerView =
  | { readonly state: 'off' }
  | { readonly state: 'closed'; readonly failuresInRow: number; readonly failuresToOpen: number; readonly cooldownMs: number }
  /** `trialAt`: when one call is let through (ms since the epoch); past it, the next call is the trial. */
  | { readonly state: 'open'; readonly trialAt: number; readonly failuresToOpen: number; readonly cooldownMs: number };

export interface Breaker {
  /**
   * A permit for one call, or null while the breaker is open (the caller answers E902 and stores nothing).
   * Once the cooldown has passed, one permit is the trial call; everyone else waits for its outcome.
   */
  permit(): CallPermit | null;
  isOpen(): boolean;
  /** How long until a call may go through again (ms; 0 when it may now, or a trial call is deciding). */
  remainingMs(): number;
  view(): BreakerView;
}

const noop: CallPermit = { done: () => undefined };

/**
 * The breaker of CONTRACT.md §7, per process. A call that ended FAILED or UNKNOWN counts as a failure, a
 * definite answer (even B2xx or E500: the account system is up) resets the count. Outcomes of calls that were
 * already in flight when it opened are ignored: only the trial call may close it.
 */
export function createBreaker(opts: BreakerOptions): Breaker {
  if (opts.failures <= 0) return { permit: () => noop, isOpen: () => false, remainingMs: () => 0, view: () => ({ state: 'off' }) };
  let failuresInRow = 0;
  let openUntil: number | null = null;
  let trialInFlight = false;

  const open = () => {
    if (openUntil === null) opts.log?.warn({ failuresInRow: opts.failures, cooldownMs: opts.cooldownMs }, 'breaker open: the account system failed calls in a row; new sends get E902 without a call until a trial call is answered');
    openUntil = opts.clock() + opts.cooldownMs;
    failuresInRow = 0;
    opts.metrics?.breakerTripped();
    opts.metrics?.breaker(true);
  };
  const close = () => {
    opts.log?.warn({}, 'breaker closed: a trial call was answered; calls to the account system go through again');
    openUntil = null;
    failuresInRow = 0;
    opts.metrics?.breaker(false);
  };

  return {
    permit() {
      if (openUntil === null) {
        return {
          done(outcome) {
            if (openUntil !== null || outcome === null) return;
            if (outcome === 'definite') failuresInRow = 0;
            else if (++failuresInRow >= opts.failures) open();
          },
        };
      }
      if (trialInFlight || opts.clock() < openUntil) return null;
      trialInFlight = true;
      return {
        done(outcome) {
          trialInFlight = false;
          if (outcome === null) return;
          if (outcome === 'definite') close();
          else open();
        },
      };
    },
    isOpen: () => openUntil !== null,
    remainingMs: () => (openUntil === null ? 0 : Math.max(0, openUntil - opts.clock())),
    view: () =>
      openUntil === null
        ? { state: 'closed', failuresInRow, failuresToOpen: opts.failures, cooldownMs: opts.cooldownMs }
        : { state: 'open', trialAt: openUntil, failuresToOpen: opts.failures, cooldownMs: opts.cooldownMs },
  };
}
