/** Account numbers shown anywhere (logs, the operator API) keep only their last 4 characters. */
export function maskAccount(account: string): string {
  return account.length <= 4 ? account : `${'*'.repeat(account.length - 4)}${account.slice(-4)}`;
}

/** The keys that hold account numbers in a transfer request (CONTRACT.md §2). */
const ACCOUNT_KEYS = new Set(['from', 'to']);

/**
 * A parsed JSON value with every string under an account key (`from`, `to`, at any depth: a channel's extra
 * fields may nest them) masked. Everything else is kept as it is.
 */
export function maskAccountsIn(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(maskAccountsIn);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, ACCOUNT_KEYS.has(k) && typeof v === 'string' ? maskAccount(v) : maskAccountsIn(v)]),
  );
}
