import type { FastifyBaseLogger } from 'fastify';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type Bindings = Record<string, unknown>;
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];
/** What pino's loggers have beyond fastify's base: asked only to skip a line its level drops. */
type LevelAware = FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean };

/**
 * A request's logger made only when it writes a line: `parent.child(bindings(), options)` on the first call of a
 * level the parent writes. A request that logs nothing, as most do at `--log-level warn`, costs no pino child (its
 * bindings serialized to JSON once per request). A line its level drops is dropped here, as the child would.
 * Options that set a level of their own make the child at once: then only the child knows what it drops.
 */
export function deferredChildLogger(parent: FastifyBaseLogger, bindings: () => Bindings, options: ChildOptions): FastifyBaseLogger {
  if (options?.level !== undefined) return parent.child(bindings(), options);
  const aware = parent as LevelAware;
  let made: FastifyBaseLogger | undefined;
  const child = (): FastifyBaseLogger => (made ??= parent.child(bindings(), options));
  const writes = (level: Level): boolean => made !== undefined || typeof aware.isLevelEnabled !== 'function' || aware.isLevelEnabled(level);
  const method = (level: Level) =>
    function (this: unknown, ...args: unknown[]): void {
      if (writes(level)) (child()[level] as (...a: unknown[]) => void)(...args);
    };
  return {
    get level() {
      return made?.level ?? parent.level;
    },
    set level(level: string) {
      child().level = level;
    },
    fatal: method('fatal'),
    error: method('error'),
    warn: method('warn'),
    info: method('info'),
    debug: method('debug'),
    trace: method('trace'),
    silent: () => undefined,
    child: (more, opts) => child().child(more, opts),
  } as FastifyBaseLogger;
}
