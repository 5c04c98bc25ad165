import { InvalidArgumentError, Option, type Command } from 'commander';
import { parseStatuses, STATUSES, type Status } from '../events/codecs.js';
import { DEFAULTS } from '../shared/defaults.js';
import { formatDuration, parseDuration } from '../shared/duration.js';
import { MIN_GRACE_MS } from '../settle/sendWindow.js';
import { postgresUrlProblem } from '../store/postgres/postgresUrl.js';
import { tracingSettingsProblem } from '../telemetry/otlpSettings.js';

/** Each boolean flag's environment variable (commander's own `.env()` is used for the others). */
const booleanVariables = new WeakMap<Option, string>();

/**
 * Every flag can also come from the environment as GUIDGATE_ + the flag in capitals, `-` as `_`
 * (CONTRACT.md §5); commander lets the command line win. The simulator's flags use `GUIDGATE_SIMULATOR_`, so
 * a relay's environment (GUIDGATE_PORT, GUIDGATE_DB) never configures a simulator started beside it.
 */
export function flag(flags: string, description: string, envPrefix: 'GUIDGATE_' | 'GUIDGATE_SIMULATOR_' = 'GUIDGATE_'): Option {
  const long = /--([a-z0-9-]+)/.exec(flags)?.[1];
  if (long === undefined) return new Option(flags, description);
  const variable = `${envPrefix}${long.toUpperCase().replace(/-/g, '_')}`;
  const option = new Option(flags, description);
  if (!option.isBoolean()) return option.env(variable);
  // commander turns a boolean flag on whenever its variable exists, `0` and `false` too: applyBooleanEnv reads it.
  const boolean = new Option(flags, `${description} (env: ${variable}=1/0)`);
  booleanVariables.set(boolean, variable);
  return boolean;
}

/** `1/0/true/false/yes/no`, any case (CONTRACT.md §5); null for anything else. */
export function parseBoolean(value: string): boolean | null {
  const v = value.toLowerCase();
  if (v === '1' || v === 'true' || v === 'yes') return true;
  if (v === '0' || v === 'false' || v === 'no') return false;
  return null;
}

/**
 * Sets the boolean flags of `command` that the command line did not give from their environment variables;
 * a value that is not a boolean is bad usage (exit 2) naming the variable, whether or not the flag was given.
 */
export function applyBooleanEnv(command: Command): void {
  for (const option of command.options) {
    const variable = booleanVariables.get(option);
    const raw = variable === undefined ? undefined : process.env[variable];
    if (variable === undefined || raw === undefined) continue;
    const value = parseBoolean(raw);
    if (value === null) {
      command.error(`error: environment variable ${variable}='${raw}' is not a boolean (1, 0, true, false, yes, no)`, { exitCode: 2, code: 'guidgate.booleanEnv' });
    }
    const key = option.attributeName();
    if (command.getOptionValueSource(key) !== 'cli') command.setOptionValueWithSource(key, value, 'env');
  }
}

export function durationArg(value: string): number {
  const ms = parseDuration(value);
  if (ms === null) throw new InvalidArgumentError(`'${value}' is not a duration (500ms, 30s, 5m, 2h, 7d)`);
  return ms;
}

/** A time limit (a call's timeout, a lock wait): zero would fail everything at once, so it is bad usage. */
export function timeLimitArg(value: string): number {
  const ms = durationArg(value);
  if (ms === 0) throw new InvalidArgumentError(`'${value}' is zero; a time limit must be longer than that`);
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

export function urlArg(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError(`'${value}' is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError(`'${value}' is not an http(s) URL`);
  return value;
}

/** `UNKNOWN`, `failed`, `UNKNOWN,FAILED`. */
export function statusesArg(value: string): Status[] {
  const statuses = parseStatuses(value);
  if (statuses === null) throw new InvalidArgumentError(`'${value}' is not a status (${STATUSES.join(', ')}; several separated by commas)`);
  return statuses;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * A duration default as `--help` and docs/operating.md write it: in days when whole days (`7d`), else in seconds
 * (`60s`, not `1m`: the tables compare seconds at a glance), else in milliseconds.
 */
export function shownDefault(ms: number): string {
  if (ms > 0 && ms % 86_400_000 === 0) return formatDuration(ms);
  return ms > 0 && ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

export const dbFlag = () => flag('--db <path>', 'ledger file, or postgres://user@host:port/dbname (several hosts: postgres://user@h1:p1,h2:p2/dbname)').default(DEFAULTS.db);

/**
 * `--db` (or GUIDGATE_DB) as a PostgreSQL URL that cannot be used (a host list that does not parse, a
 * target_session_attrs other than read-write or primary) is bad usage, exit 2, for every command: the message names
 * the part at fault, never the URL (it may hold a password).
 */
export function checkDbUrl(command: Command): void {
  const db: unknown = command.opts()['db'];
  if (typeof db !== 'string' || !/^postgres(ql)?:\/\//i.test(db)) return;
  const problem = postgresUrlProblem(db);
  if (problem !== null) command.error(`error: --db: ${problem}`, { exitCode: 2, code: 'guidgate.db' });
}
/** The commands that export spans when an OTLP endpoint is set (the others only pass the trace context on). */
const EXPORTING_COMMANDS = new Set(['serve', 'resolve', 'reprocess']);

/**
 * For the commands that export spans, OpenTelemetry variables asking for an export guidgate cannot make (an OTLP
 * protocol other than http/protobuf or http/json) are bad usage, exit 2, naming the variable: before anything is
 * opened or called.
 */
export function checkTracingEnv(command: Command): void {
  if (!EXPORTING_COMMANDS.has(command.name())) return;
  const problem = tracingSettingsProblem();
  if (problem !== null) command.error(`error: ${problem}`, { exitCode: 2, code: 'guidgate.tracing' });
}
export const accountUrlFlag = () => flag('--account-url <url>', 'base URL of the account system').argParser(urlArg).makeOptionMandatory();
export const limitFlag = (what = 'handle at most this many rows') => flag('--limit <n>', what).argParser(intArg(1));
export const dryRunFlag = (what: string) => flag('--dry-run', what);
export const concurrencyFlag = (what: string) => flag('--concurrency <n>', what).argParser(intArg(1, 256)).default(DEFAULTS.concurrency);
/** `--timeout`: one call's overall deadline (serve, naive, reprocess), or one inquiry's (resolve). */
export const timeoutFlag = (what: string) => flag('--timeout <duration>', what).argParser(timeLimitArg).default(DEFAULTS.timeoutMs, shownDefault(DEFAULTS.timeoutMs));
/** `--max-attempts`: sends of one GUID at most (serve, reprocess), or the cap `stats` counts dead letters at. */
export const maxAttemptsFlag = (what: string) => flag('--max-attempts <n>', what).argParser(intArg(1)).default(DEFAULTS.maxAttempts);
export const jsonFlag = (what = 'print the result as JSON') => flag('--json', what);

/**
 * `--grace`, for every command that sweeps orphans or sends (serve, resolve, reprocess): at least MIN_GRACE_MS, since
 * half of it is the window in which a claim must commit and its call start (src/settle/sendWindow.ts). Every process on
 * one ledger should be given the same value.
 */
export const graceFlag = (what: string) =>
  flag('--grace <duration>', what)
    .argParser((value: string): number => {
      const ms = durationArg(value);
      if (ms < MIN_GRACE_MS) {
        throw new InvalidArgumentError(`'${value}' is under ${MIN_GRACE_MS}ms: half of --grace is the time a claim has to commit and its call to start, and a relay must be able to do that (docs/architecture.md, "The grace and the send window")`);
      }
      return ms;
    })
    .default(DEFAULTS.graceMs, shownDefault(DEFAULTS.graceMs));

/** `--min-age`: how old a row's last Sent must be before it is inquired about (or, FAILED by an inquiry, sent again). */
export const minAgeFlag = (what: string) => flag('--min-age <duration>', what).argParser(durationArg).default(DEFAULTS.minAgeMs, shownDefault(DEFAULTS.minAgeMs));
