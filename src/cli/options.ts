import { readFileSync, statSync } from 'node:fs';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { decodeEnvironmentFile, parseEnvironmentFile, type Assignment } from './environmentFile.js';
import { parseStatuses, STATUSES, type Status } from '../events/codecs.js';
import { DEFAULTS } from '../shared/defaults.js';
import { splitDbUrl } from '../shared/dbUrl.js';
import { formatDuration, parseDuration } from '../shared/duration.js';
import { MIN_GRACE_MS } from '../send/sendWindow.js';
import { parseInquiryRate } from '../account/inquiryPacer.js';
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
  if (!option.isBoolean() && !option.negate) return option.env(variable);
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
    // A negated flag's variable says the flag itself: GUIDGATE_NO_RECORD=1 means --no-record, so `record` is false.
    if (command.getOptionValueSource(key) !== 'cli') command.setOptionValueWithSource(key, option.negate ? !value : value, 'env');
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

/**
 * Where the continuity marks of SQLite ledgers are kept (CONTRACT.md §9): apart from the data directory, so that a
 * restore of it does not bring an agreeing mark back. Every command that writes the ledger takes it.
 */
export const continuityDirFlag = () =>
  flag('--continuity-dir <dir>', 'SQLite: folder of the continuity marks, outside the data directory that a restore puts back (default: $XDG_STATE_HOME/guidgate, else ~/.local/state/guidgate); serve and every command that writes the ledger must use the same');

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
  const from = configuredAt(command, 'db');
  if (problem !== null) command.error(`error: ${from === undefined ? '--db' : `${from}: GUIDGATE_DB`}: ${problem}`, { exitCode: 2, code: 'guidgate.db' });
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
  // A variable the config file gave (the environment had none) is named with the file and its line.
  const from = [...(configuredVariables.get(command) ?? [])].find(([name]) => problem?.includes(name) === true)?.[1];
  if (problem !== null) command.error(`error: ${from === undefined ? '' : `${from}: `}${problem}`, { exitCode: 2, code: 'guidgate.tracing' });
}

// ---- --config: every command reads a file of GUIDGATE_NAME=value lines (CONTRACT.md §5) ----

export const CONFIG_VARIABLE = 'GUIDGATE_CONFIG';

/** A program-wide option, so that every command (and `keys add`) takes it, before or after the command's name. */
export const configFlag = () =>
  new Option('--config <path>', 'read settings from this file of GUIDGATE_NAME=value lines (systemd EnvironmentFile format); a flag or the environment wins over it').env(CONFIG_VARIABLE);

/**
 * Variables a config file may hold besides the commands' own: OpenTelemetry's (read by `serve`, `resolve` and
 * `reprocess` when exporting spans; the SDK reads more than guidgate checks, so any `OTEL_` name), and Node's own,
 * which the unit's environment gives the process at its start and `--config` cannot (they are taken, not applied).
 */
const OPENTELEMETRY_VARIABLE = /^OTEL_[A-Z0-9_]+$/;
const RUNTIME_VARIABLES: ReadonlySet<string> = new Set(['NODE_OPTIONS', 'NODE_EXTRA_CA_CERTS', 'UV_THREADPOOL_SIZE']);

/**
 * Why a setting is a secret, or null: its name says so (`…SECRET…` such as GUIDGATE_NOTIFY_SECRET_FILE, `…PASSWORD…`,
 * `…TOKEN…`, a name ending in `_KEY` such as GUIDGATE_TLS_KEY or an account client's key, an OTLP exporter's headers,
 * which carry the collector's credentials), or its value does (a URL with a password, such as a PostgreSQL `--db`;
 * a PEM private key). A config file holding one must not be readable by others.
 */
export function secretIn(name: string, value: string): string | null {
  if (/SECRET|PASSWORD|PASSWD|TOKEN/.test(name) || name.endsWith('_KEY') || /^OTEL_EXPORTER_OTLP_(TRACES_)?HEADERS$/.test(name)) return `${name} is a secret`;
  if (splitDbUrl(value)?.password != null || /[?&]password=/i.test(value)) return `${name} holds a URL with a password`;
  if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(value)) return `${name} holds a private key`;
  return null;
}

/** Per command: the attribute of each option the config file set, and where (`FILE line N`), for later checks to name it. */
const configuredOptions = new WeakMap<Command, Map<string, string>>();
/** Per command: the variables the config file put into the environment (OpenTelemetry's), and where. */
const configuredVariables = new WeakMap<Command, Map<string, string>>();

/** Where the config file set this option of `command` (`FILE line N`), if it did and nothing overrode it. */
export function configuredAt(command: Command, attribute: string): string | undefined {
  return command.getOptionValueSource(attribute) === 'config' ? configuredOptions.get(command)?.get(attribute) : undefined;
}

/** Each option of `command` that a variable sets, by its variable's name. */
function optionsByVariable(command: Command): Map<string, Option> {
  const byName = new Map<string, Option>();
  for (const option of command.options) {
    const variable = option.envVar ?? booleanVariables.get(option);
    if (variable !== undefined) byName.set(variable, option);
  }
  return byName;
}

/** Every variable some guidgate command takes. */
function everyVariable(command: Command, into = new Set<string>()): Set<string> {
  for (const name of optionsByVariable(command).keys()) into.add(name);
  for (const sub of command.commands) everyVariable(sub, into);
  return into;
}

/**
 * Makes every command read `--config` (or GUIDGATE_CONFIG) before its own flags and variables are parsed, so that
 * commander's order gives the contract's precedence: the command-line flag, then the environment, then the file,
 * then the default (a value from the file has commander's source `config`, which the environment overrides). Call
 * once every command is registered.
 */
export function readConfigBeforeEachCommand(program: Command): void {
  const commands = (c: Command): Command[] => [c, ...c.commands.flatMap(commands)];
  const known = everyVariable(program);
  for (const parent of commands(program)) {
    if (parent.commands.length === 0) continue;
    parent.hook('preSubcommand', (_parent, sub) => {
      if (sub.commands.length === 0) applyConfigFile(program, sub, known);
    });
  }
}

/**
 * The config file's settings for `command`: a line naming no variable of any command (a typo), a bad value for one of
 * this command's flags, or a secret in a file others may read is bad usage (exit 2) naming the file and the line; a
 * variable only other commands take is left alone. Never prints a value that may be a secret.
 */
function applyConfigFile(program: Command, command: Command, known: ReadonlySet<string>): void {
  const path: unknown = program.opts()['config'];
  if (path === undefined) return;
  const refuse = (where: string, why: string): never => program.error(`error: ${where}: ${why}`, { exitCode: 2, code: 'guidgate.config' });
  if (typeof path !== 'string' || path === '') return refuse('--config', `no file named (${CONFIG_VARIABLE} is empty)`);
  let bytes: Buffer;
  let othersMayRead: boolean;
  try {
    bytes = readFileSync(path);
    othersMayRead = (statSync(path).mode & 0o004) !== 0;
  } catch (e) {
    return refuse(`--config ${path}`, `cannot read it (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  const decoded = decodeEnvironmentFile(bytes);
  const parsed = decoded.ok ? parseEnvironmentFile(decoded.text) : decoded;
  if (!parsed.ok) return refuse(`${path} line ${parsed.problem.line}`, parsed.problem.problem);
  const mine = optionsByVariable(command);
  const set = new Map<string, string>();
  const variables = new Map<string, string>();
  for (const a of parsed.assignments) {
    const where = `${path} line ${a.line}`;
    if (a.name === CONFIG_VARIABLE) refuse(where, `${CONFIG_VARIABLE} names the config file; a config file cannot name another`);
    // A secret others may read is said first: it is exposed whatever else is wrong with the line.
    const secret = secretIn(a.name, a.value);
    if (secret !== null && othersMayRead) refuse(where, `${secret}, and others may read the file: chmod o-r ${path} (give it to root and the service's group, mode 0640)`);
    if (!known.has(a.name) && !OPENTELEMETRY_VARIABLE.test(a.name) && !RUNTIME_VARIABLES.has(a.name)) refuse(where, `${a.name} is no variable of any guidgate command (a typo?)`);
    const option = mine.get(a.name);
    if (option !== undefined) {
      set.set(option.attributeName(), where);
      command.setOptionValueWithSource(option.attributeName(), configValue(option, a, secret !== null, where, refuse), 'config');
    } else if (OPENTELEMETRY_VARIABLE.test(a.name) && EXPORTING_COMMANDS.has(command.name()) && process.env[a.name] === undefined) {
      variables.set(a.name, where);
    }
  }
  // The later of two lines for one variable counts, as for systemd.
  const last = new Map(parsed.assignments.map((a) => [a.name, a.value]));
  for (const name of variables.keys()) process.env[name] = last.get(name);
  configuredOptions.set(command, set);
  configuredVariables.set(command, variables);
}

/** A file's value for an option, parsed as the flag's own value would be; a bad one is refused naming the line. */
function configValue(option: Option, a: Assignment, secret: boolean, where: string, refuse: (where: string, why: string) => never): unknown {
  if (booleanVariables.has(option)) {
    const value = parseBoolean(a.value);
    return value ?? refuse(where, `${a.name}='${a.value}' is not a boolean (1, 0, true, false, yes, no)`);
  }
  if (option.parseArg === undefined) return a.value;
  try {
    return option.parseArg(a.value, undefined);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    return refuse(where, secret ? `${a.name}: not a valid value for ${option.long ?? option.flags} (not shown: it may hold a secret)` : `${a.name}: ${why}`);
  }
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
 * half of it is the window in which a claim must commit and its call start (src/send/sendWindow.ts). Every process on
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

/** `50/s`, `600/m`, `3/h`, or `0` (no cap); kept as written, read by `inquiryPacing` where the account client is made. */
export function inquiryRateArg(value: string): string {
  if (parseInquiryRate(value) === undefined) throw new InvalidArgumentError(`'${value}' is not an inquiry rate (50/s, 600/m, 3/h; 0: no cap)`);
  return value.trim();
}

/** `--inquiry-rate`: the inquiries one process makes at most, every source together (CONTRACT.md §7). */
export const inquiryRateFlag = (what: string) => flag('--inquiry-rate <rate>', what).argParser(inquiryRateArg).default(DEFAULTS.inquiryRate);

/** `--min-age`: how old a row's last Sent must be before it is inquired about (or, FAILED by an inquiry, sent again). */
export const minAgeFlag = (what: string) => flag('--min-age <duration>', what).argParser(durationArg).default(DEFAULTS.minAgeMs, shownDefault(DEFAULTS.minAgeMs));
