import type { FastifyBaseLogger } from 'fastify';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type Bindings = Record<string, unknown>;
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];
/** What pino's loggers have beyond fastify's base: asked only to skip a line its level drops. */
type LevelAware = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean };
type LogMethod = (...args: unknown[]) => void;

/**
 * A request's logger made only when it writes a line: `parent.child(bindings(), options)` on the first call of a
 * level the parent writes. A request that logs nothing, as most do at `--log-level warn`, costs no pino child (its
 * bindings serialized to JSON once per request). A line its level drops is dropped here, as the child would.
 * Options that set a level of their own make the child at once: then only the child knows what it drops.
 */
export function deferredChildLogger(parent: FastifyBaseLogger, bindings: () => Bindings, options: ChildOptions): FastifyBaseLogger {
  if (options?.level !== undefined) return parent.child(bindings(), options);
  return new DeferredChild(parent as LevelAware, bindings, options) as FastifyBaseLogger;
}

/** A class, not a literal of closures: one object per request, its methods shared. */
class DeferredChild {
  #made: FastifyBaseLogger | undefined;
  readonly #parent: LevelAware;
  readonly #bindings: () => Bindings;
  readonly #options: ChildOptions;

  constructor(parent: LevelAware, bindings: () => Bindings, options: ChildOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  #child(): FastifyBaseLogger {
    return (this.#made ??= this.#parent.child(this.#bindings(), this.#options));
  }

  #write(level: Level, args: unknown[]): void {
    const parent = this.#parent;
    if (this.#made === undefined && typeof parent.isLevelEnabled === 'function' && !parent.isLevelEnabled(level)) return;
    (this.#child()[level] as LogMethod)(...args);
  }

  get level(): string {
    return this.#made?.level ?? this.#parent.level;
  }
  set level(level: string) {
    this.#child().level = level;
  }
  fatal(...args: unknown[]): void {
    this.#write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.#write('error', args);
  }
  warn(...args: unknown[]): void {
    this.#write('warn', args);
  }
  info(...args: unknown[]): void {
    this.#write('info', args);
  }
  debug(...args: unknown[]): void {
    this.#write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.#write('trace', args);
  }
  silent(): void {}
  child(more: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.#child().child(more, options);
  }
}
