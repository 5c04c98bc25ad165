/**
 * The command line of a bench script (`node dist/bench/X.js`): its options, each with what it does and its
 * default, are also its `--help`. An unknown option or a bad one is said on stderr with the usage, exit 2.
 */
import { parseArgs } from 'node:util';

type BenchOption =
  | { readonly type: 'string'; readonly default?: string; readonly help: string; readonly value?: string }
  | { readonly type: 'boolean'; readonly default?: boolean; readonly help: string };

type Values<O extends Record<string, BenchOption>> = {
  [K in keyof O]: O[K] extends { type: 'boolean' } ? boolean : O[K] extends { default: string } ? string : string | undefined;
};

export interface BenchUsage<O extends Record<string, BenchOption>> {
  /** How it is run, e.g. `node dist/bench/appendBench.js` or `npm run bench:append --`. */
  readonly run: string;
  /** What it measures, and what it prints. */
  readonly about: string;
  readonly options: O;
  /** Positional arguments, as they are written in the usage line (`N PATH`); none when absent. */
  readonly positionals?: string;
}

/** The usage text `--help` prints. */
export function usageText(usage: BenchUsage<Record<string, BenchOption>>): string {
  const rows = Object.entries(usage.options).map(([name, o]) => {
    const flag = o.type === 'string' ? `--${name} ${o.value ?? 'X'}` : `--${name}`;
    const shownDefault = o.type === 'string' && o.default !== undefined && o.default !== '' ? ` (default ${o.default})` : '';
    return [flag, `${o.help}${shownDefault}`] as const;
  });
  rows.push(['--help', 'this text']);
  const width = Math.max(...rows.map(([flag]) => flag.length)) + 2;
  const positionals = usage.positionals === undefined ? '' : ` ${usage.positionals}`;
  return `${usage.run} [options]${positionals}\n${usage.about}\n\n${rows.map(([flag, text]) => `  ${flag.padEnd(width)}${text}`).join('\n')}\n`;
}

/** Parses `process.argv` (after the script) by `usage`; `--help` prints the usage and exits 0. */
export function benchArgs<O extends Record<string, BenchOption>>(usage: BenchUsage<O>, argv: readonly string[] = process.argv.slice(2)): { values: Values<O>; positionals: string[] } {
  const options = Object.fromEntries([
    ...Object.entries(usage.options).map(([name, o]) => [name, o.default === undefined ? { type: o.type } : { type: o.type, default: o.default }]),
    ['help', { type: 'boolean', default: false }],
  ]) as Record<string, { type: 'string' | 'boolean'; default?: string | boolean }>;
  let parsed: { values: Record<string, string | boolean | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: usage.positionals !== undefined });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${usageText(usage)}`);
    process.exit(2);
  }
  if (parsed.values['help'] === true) {
    process.stdout.write(usageText(usage));
    process.exit(0);
  }
  return { values: parsed.values as Values<O>, positionals: parsed.positionals };
}
