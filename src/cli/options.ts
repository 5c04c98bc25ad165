import { InvalidArgumentError, Option } from 'commander';
import { parseDuration } from './duration.js';

/**
 * Every flag can also come from the environment as GUIDGATE_ + the flag in capitals, `-` as `_`
 * (CONTRACT.md §5); commander lets the command line win.
 */
export function flag(flags: string, description: string): Option {
  const long = /--([a-z0-9-]+)/.exec(flags)?.[1];
  const option = new Option(flags, description);
  return long === undefined ? option : option.env(`GUIDGATE_${long.toUpperCase().replace(/-/g, '_')}`);
}

export function durationArg(value: string): number {
  const ms = parseDuration(value);
  if (ms === null) throw new InvalidArgumentError(`'${value}' is not a duration (500ms, 30s, 5m, 2h, 7d)`);
  return ms;
}

/** A duration, or `0` for off. */
export function durationOrOffArg(value: string): number {
  return value.trim() === '0' ? 0 : durationArg(value);
}

export function intArg(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    if (!/^\d+$/.test(value.trim())) throw new InvalidArgumentError(`'${value}' is not a whole number`);
    const n = Number(value);
    if (n < min || n > max) throw new InvalidArgumentError(`'${value}' is out of range ${min}..${max}`);
    return n;
  };
}

export function choiceArg<T extends string>(choices: readonly T[]) {
  return (value: string): T => {
    // Case does not matter on the command line (`full`, `FULL`); the choice comes back as declared.
    const v = choices.find((c) => c.toUpperCase() === value.toUpperCase());
    if (v === undefined) throw new InvalidArgumentError(`'${value}' is not one of ${choices.join(', ')}`);
    return v;
  };
}

export const DEFAULT_DB = './data/guidgate.db';
