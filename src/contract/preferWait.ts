/** The longest wait a channel may ask for with `Prefer: wait=N` (CONTRACT.md §2: N whole seconds, 1–30). */
export const MAX_PREFER_WAIT_S = 30;

/**
 * The `Prefer: wait` a client whose attempt may last `attemptMs` sends: whole seconds that leave a second of that
 * attempt for the relay's answer once the wait ends, at most `most` (and 30); null when less than one second fits.
 */
export function fittingWait(attemptMs: number, most: number = MAX_PREFER_WAIT_S): number | null {
  const seconds = Math.min(MAX_PREFER_WAIT_S, Math.floor(most), Math.floor((attemptMs - 1000) / 1000));
  return seconds >= 1 ? seconds : null;
}

/** The preferences of a `Prefer` header (RFC 7240), split at the commas that are not inside a quoted string. */
function preferences(header: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < header.length; i++) {
    const c = header[i]!;
    if (quoted && c === '\\') {
      current += c + (header[i + 1] ?? '');
      i++;
      continue;
    }
    if (c === '"') quoted = !quoted;
    if (c === ',' && !quoted) {
      parts.push(current);
      current = '';
    } else current += c;
  }
  parts.push(current);
  return parts;
}

/**
 * The seconds of `Prefer: wait=N` (RFC 7240), or null when the request asks for no wait the relay takes: no `wait`
 * preference, or one whose value is not a whole number of seconds from 1 to 30 (ignored, as RFC 7240 asks of a
 * preference a server does not take). Several `Prefer` headers count as one list; of several `wait`s the first
 * counts (RFC 7240 §2). The value may be quoted; parameters after `;` are ignored.
 */
export function preferredWait(header: string | readonly string[] | undefined): number | null {
  if (header === undefined) return null;
  const text = typeof header === 'string' ? header : header.join(',');
  for (const preference of preferences(text)) {
    const head = preference.split(';')[0]!;
    const eq = head.indexOf('=');
    const name = (eq === -1 ? head : head.slice(0, eq)).trim().toLowerCase();
    if (name !== 'wait') continue;
    if (eq === -1) return null;
    let value = head.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (!/^[0-9]{1,6}$/.test(value)) return null;
    const seconds = Number(value);
    return seconds >= 1 && seconds <= MAX_PREFER_WAIT_S ? seconds : null;
  }
  return null;
}
