import { DEFAULTS } from '../shared/defaults.js';
import { parseDuration } from '../shared/duration.js';
import { ReconcileUsageError } from './errors.js';
import type { ReconcileWindow } from './types.js';

export type ParsedInstant = { readonly ok: true; readonly ms: number } | { readonly ok: false; readonly reason: string };

/** The `--pending` default: what contract §8's synopsis shows. */
export const DEFAULT_PENDING_MS = DEFAULTS.reconcilePendingMs;

const NO_OFFSET =
  'add an offset (Z, +08:00, -05:00): a day in a time zone is the operator\'s choice, never the host\'s local time by accident';
const MS = /^[0-9]+$/;
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const ISO =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?$/;

function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/**
 * An instant as milliseconds since the epoch (digits only) or ISO 8601 with an offset
 * (`2024-05-01T00:00:00+08:00`, `…Z`, fractions of a second cut to whole ms). A date alone or a time without an
 * offset is refused: read in the host's time zone it would name another instant on every machine.
 */
export function parseInstant(text: string): ParsedInstant {
  const s = text.trim();
  if (MS.test(s)) {
    const ms = Number(s);
    return Number.isSafeInteger(ms) ? { ok: true, ms } : { ok: false, reason: `${s} is past the largest time in ms` };
  }
  if (DATE_ONLY.test(s)) return { ok: false, reason: `${s} is a date without a time: give a time and ${NO_OFFSET}` };
  const m = ISO.exec(s);
  if (m === null) return { ok: false, reason: `${s} is neither ms since the epoch nor ISO 8601 with an offset` };
  const [year, month, day, hour, minute] = [m[1], m[2], m[3], m[4], m[5]].map(Number) as [number, number, number, number, number];
  const second = m[6] === undefined ? 0 : Number(m[6]);
  if (m[8] === undefined && m[9] === undefined) return { ok: false, reason: `${s} has no offset: ${NO_OFFSET}` };
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || second > 59) {
    return { ok: false, reason: `${s} is not a valid date and time` };
  }
  let offsetMin = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]);
    const om = m[11] === undefined ? 0 : Number(m[11]);
    if (oh > 23 || om > 59) return { ok: false, reason: `${s} has an offset out of range` };
    offsetMin = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const fractionMs = m[7] === undefined ? 0 : Number(m[7].padEnd(3, '0').slice(0, 3));
  const ms = Date.UTC(year, month - 1, day, hour, minute, second, fractionMs) - offsetMin * 60_000;
  // Date.UTC maps years 0–99 to 1900–1999; no journal of ours predates the epoch anyway.
  if (year < 1970 || ms < 0) return { ok: false, reason: `${s} is before 1970` };
  return { ok: true, ms };
}

export interface WindowOptions {
  readonly from: string | undefined;
  readonly to: string | undefined;
  readonly pending?: string | undefined;
}

/** `--from`, `--to` and `--pending` as the operator typed them → the window; a ReconcileUsageError names the flag. */
export function parseWindow(opts: WindowOptions): ReconcileWindow {
  const instant = (flag: '--from' | '--to', text: string | undefined): number => {
    if (text === undefined || text.trim() === '') throw new ReconcileUsageError(flag, 'is required (ms since the epoch or ISO 8601 with an offset)');
    const parsed = parseInstant(text);
    if (!parsed.ok) throw new ReconcileUsageError(flag, parsed.reason);
    return parsed.ms;
  };
  const from = instant('--from', opts.from);
  const to = instant('--to', opts.to);
  if (to <= from) throw new ReconcileUsageError('--to', 'must be after --from (the window is [from, to))');
  let pendingMs: number = DEFAULT_PENDING_MS;
  if (opts.pending !== undefined) {
    const parsed = opts.pending.trim() === '0' ? 0 : parseDuration(opts.pending);
    if (parsed === null) throw new ReconcileUsageError('--pending', `${opts.pending} is not a duration (500ms, 30s, 5m, 2h, 7d, or 0)`);
    pendingMs = parsed;
  }
  return { from, to, pendingMs };
}

/** The journal a run reads: entries applied in [from − pending, to + pending) (docs/reconciliation-rules.md). */
export function journalRange(w: ReconcileWindow): { readonly from: number; readonly to: number } {
  return { from: Math.max(0, w.from - w.pendingMs), to: w.to + w.pendingMs };
}
