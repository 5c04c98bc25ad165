/** What the commands print: results on stdout, progress and problems on stderr. */

/**
 * C0 controls, DEL and C1 controls. Text from the ledger can hold them (an account system's answer is stored
 * byte for byte); printed raw, an ESC or CSI sequence would make the terminal act (clear the screen, rewrite
 * a line an auditor reads) and a newline would forge a line of output.
 */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;
const DEL_AND_C1 = /[\u007f-\u009f]/g;
const unicodeEscape = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** `text` with every control character shown as a `\u001b`-style escape. */
export const escapeControls = (text: string): string => text.replace(CONTROLS, unicodeEscape);

/**
 * JSON whose text holds no control character: JSON.stringify escapes C0 inside strings but leaves DEL and C1
 * as they are. Outside strings JSON is ASCII, so escaping them changes no value.
 */
export const toJson = (value: unknown, indent?: number): string => JSON.stringify(value, null, indent).replace(DEL_AND_C1, unicodeEscape);

/** A line of human output; control characters in it are escaped. */
export const out = (line: string): void => void process.stdout.write(`${escapeControls(line)}\n`);
export const err = (line: string): void => void process.stderr.write(`${escapeControls(line)}\n`);
export const printJson = (value: unknown): void => void process.stdout.write(`${toJson(value, 2)}\n`);

let whenStdoutCloses: 'end' | 'keep running' = 'end';

/**
 * `guidgate ledger | head -1`: once the reader is gone there is nobody left to tell, so the command ends
 * quietly with exit 0 (Node would otherwise die of the EPIPE with a stack trace). A closed stderr is ignored.
 */
export function endQuietlyOnClosedPipe(): void {
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    if (whenStdoutCloses === 'end') process.exit(0);
  });
  process.stderr.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
  });
}

/** For the servers: a log collector that restarts (closing stdout) must not stop a relay; it keeps serving. */
export function keepRunningWhenStdoutCloses(): void {
  whenStdoutCloses = 'keep running';
}

export const iso = (ms: number): string => new Date(ms).toISOString();

/** 90061000 → `1d 1h 1m 1s`; under a second → `…ms`. */
export function age(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const parts: string[] = [];
  let s = Math.floor(ms / 1000);
  for (const [unit, size] of [['d', 86_400], ['h', 3_600], ['m', 60], ['s', 1]] as const) {
    if (s >= size) {
      parts.push(`${Math.floor(s / size)}${unit}`);
      s %= size;
    }
  }
  return parts.slice(0, 2).join(' ');
}

/** GUIDs a summary names on a terminal before it says how many more (`--json` names them all). */
export const NAMED_ON_TERMINAL = 5;

/** `A, B, C …7 more`: the first `shown` of `items` and how many are left out, for a summary on a terminal. */
export function firstFew(items: readonly string[], shown = NAMED_ON_TERMINAL): string {
  const rest = items.length - shown;
  return rest > 0 ? `${items.slice(0, shown).join(', ')} …${rest} more` : items.join(', ');
}

/**
 * The GUIDs of a run, by what happened to each (`processed`, `absent`, `purged`, …), in the order the outcomes first
 * came and each outcome's GUIDs sorted: the summary's `--json` `guids` and its lines on a terminal.
 */
export function guidsByOutcome() {
  const byOutcome = new Map<string, string[]>();
  const sorted = () => [...byOutcome].map(([outcome, guids]) => [outcome, [...guids].sort()] as const);
  return {
    add(outcome: string, guid: string): void {
      const list = byOutcome.get(outcome);
      if (list === undefined) byOutcome.set(outcome, [guid]);
      else list.push(guid);
    },
    json(): Record<string, string[]> {
      return Object.fromEntries(sorted());
    },
    /** `  processed: A, B …3 more`, one line per outcome. */
    lines(): string[] {
      return sorted().map(([outcome, guids]) => `  ${outcome}: ${firstFew(guids)}`);
    },
  };
}

export type Exit = 0 | 1;

export const setExit = (code: number): void => {
  process.exitCode = code;
};
