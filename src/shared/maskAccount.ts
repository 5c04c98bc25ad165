import { SHOWN_DEPTH, nestedMarker, nestingOf } from '../json/shownLimits.js';

/** Account numbers shown anywhere (logs, the HTTP API) keep only their last 4 characters. */
export function maskAccount(account: string): string {
  return account.length <= 4 ? account : `${'*'.repeat(account.length - 4)}${account.slice(-4)}`;
}

/** The keys that hold account numbers in a transfer request (CONTRACT.md §2), and in answers that echo them. */
const ACCOUNT_KEYS = new Set(['from', 'to']);

/** The end of the JSON string token that starts with the quote at `start`: the index of its closing quote. */
function stringEnd(text: string, start: number): number {
  for (let i = start + 1; ; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x5c) i++;
    else if (c === 0x22) return i;
  }
}

/** Characters a JSON number is written with. */
const NUMBER_CHAR = /[-+.eE0-9]/;

/**
 * JSON text with the value under every account key (`from`, `to`, at any depth: a channel's extra fields and an
 * account system's answer may nest them) masked: a string, or a number (an account number written as one), becomes
 * the masked string; in an object or array there, every string and number is. Everything else stays byte for byte
 * (numbers as written, duplicate keys, spacing), and the result is JSON. Keys are compared decoded, so `"fr\u006fm"`
 * counts. Null when `text` is not JSON: then nothing in it could be told apart, so none of it may be shown.
 */
export function maskAccountsInJson(text: string): string | null {
  try {
    JSON.parse(text);
  } catch {
    return null;
  }
  // From here on the text is known to be JSON: the scan below only needs to tell tokens apart.
  const containers: Array<{ readonly object: boolean; expectKey: boolean }> = [];
  /** The next value is an account key's. */
  let accountValue = false;
  /** Containers deeper than this are inside an account key's value: every scalar in them is masked (-1: none). */
  let maskedBelow = -1;
  let out = '';
  let copied = 0;
  const replace = (start: number, end: number, shown: string): void => {
    out += text.slice(copied, start) + JSON.stringify(maskAccount(shown));
    copied = end;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const top = containers[containers.length - 1];
    const masking = accountValue || (maskedBelow >= 0 && containers.length > maskedBelow);
    if (c === 0x22) {
      const end = stringEnd(text, i);
      if (top?.object === true && top.expectKey) {
        top.expectKey = false;
        accountValue = ACCOUNT_KEYS.has(JSON.parse(text.slice(i, end + 1)) as string);
      } else {
        if (masking) replace(i, end + 1, JSON.parse(text.slice(i, end + 1)) as string);
        accountValue = false;
      }
      i = end;
    } else if (c === 0x7b || c === 0x5b) {
      if (accountValue && maskedBelow < 0) maskedBelow = containers.length;
      accountValue = false;
      containers.push({ object: c === 0x7b, expectKey: c === 0x7b });
    } else if (c === 0x7d || c === 0x5d) {
      containers.pop();
      if (containers.length <= maskedBelow) maskedBelow = -1;
    } else if (c === 0x2c) {
      if (top?.object === true) top.expectKey = true;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      let end = i + 1;
      while (end < text.length && NUMBER_CHAR.test(text[end]!)) end++;
      if (masking) replace(i, end, text.slice(i, end));
      accountValue = false;
      i = end - 1;
    } else if (c === 0x74 || c === 0x66 || c === 0x6e) {
      // true, false, null: nothing to mask.
      accountValue = false;
    }
  }
  return out + text.slice(copied);
}

/**
 * A parsed JSON value masked by the same rule as `maskAccountsInJson` (for data that is already parsed, such as an
 * event's), down to `SHOWN_DEPTH` levels: a value nested deeper becomes `…(nested N levels deeper)`, since the view
 * serialises what it gets and JSON.stringify (like this walk) overflows the stack at about 10,000 levels.
 */
export function maskAccountsIn(value: unknown): unknown {
  return masked(value, 0, false);
}

/** `under`: the value is (inside) an account key's, so every string and number in it is masked. */
function masked(value: unknown, depth: number, under: boolean): unknown {
  if (typeof value === 'string') return under ? maskAccount(value) : value;
  if (typeof value === 'number') return under ? maskAccount(JSON.stringify(value)) : value;
  if (value === null || typeof value !== 'object') return value;
  if (depth >= SHOWN_DEPTH) return nestedMarker(nestingOf(value));
  if (Array.isArray(value)) return value.map((v) => masked(v, depth + 1, under));
  return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, masked(v, depth + 1, under || ACCOUNT_KEYS.has(k))]));
}
