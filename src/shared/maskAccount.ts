import { SHOWN_DEPTH, nestedMarker, nestingOf } from '../json/shownLimits.js';

/** Account numbers shown anywhere (logs, the operator API) keep only their last 4 characters. */
export function maskAccount(account: string): string {
  return account.length <= 4 ? account : `${'*'.repeat(account.length - 4)}${account.slice(-4)}`;
}

/** The keys that hold account numbers in a transfer request (CONTRACT.md §2). */
const ACCOUNT_KEYS = new Set(['from', 'to']);

/**
 * A parsed JSON value with every string under an account key (`from`, `to`, at any depth: a channel's extra
 * fields may nest them) masked, as every view shows it. Everything else is kept as it is, down to `SHOWN_DEPTH`
 * levels: a value nested deeper becomes `…(nested N levels deeper)`, since the view serialises what it gets and
 * JSON.stringify (like this walk) overflows the stack at about 10,000 levels.
 */
export function maskAccountsIn(value: unknown): unknown {
  return masked(value, 0);
}

function masked(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (depth >= SHOWN_DEPTH) return nestedMarker(nestingOf(value));
  if (Array.isArray(value)) return value.map((v) => masked(v, depth + 1));
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, ACCOUNT_KEYS.has(k) && typeof v === 'string' ? maskAccount(v) : masked(v, depth + 1)]),
  );
}
