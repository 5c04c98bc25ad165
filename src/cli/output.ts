/** What the commands print: results on stdout, progress and problems on stderr. */

export const out = (line: string): void => void process.stdout.write(`${line}\n`);
export const err = (line: string): void => void process.stderr.write(`${line}\n`);
export const printJson = (value: unknown): void => out(JSON.stringify(value, null, 2));

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

export type Exit = 0 | 1;

export const setExit = (code: number): void => {
  process.exitCode = code;
};
