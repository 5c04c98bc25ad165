import cliProgress from 'cli-progress';

export interface Progress {
  update(done: number, total: number): void;
  stop(): void;
}

export interface ProgressOptions {
  /** Where the bar or the lines go (default stderr, so stdout stays the result). */
  readonly stream?: NodeJS.WriteStream;
  /** Nothing is shown for runs shorter than this (default 2 s). */
  readonly delayMs?: number;
  /** Without a terminal: one plain line at most this often (default 5 s). */
  readonly plainEveryMs?: number;
  /** What is counted (default `rows`; reconcile counts the journal's `bytes`, then its `entries`). */
  readonly unit?: string;
}

/**
 * Progress of a long run: a cli-progress bar when the stream is a terminal, plain `label: done/total` lines
 * otherwise (cron, pipes, log files); nothing at all for runs that end within `delayMs`.
 */
export function startProgress(label: string, opts: ProgressOptions = {}): Progress {
  const stream = opts.stream ?? process.stderr;
  const delayMs = opts.delayMs ?? 2000;
  const plainEveryMs = opts.plainEveryMs ?? 5000;
  const unit = opts.unit ?? 'rows';
  const tty = stream.isTTY === true;
  const started = performance.now();
  let bar: cliProgress.SingleBar | null = null;
  let lastPlain = Number.NEGATIVE_INFINITY;
  let last = { done: 0, total: 0 };
  // The bar appears only after `delayMs`; its own clock would start there, so the elapsed time is ours.
  const elapsed = (now: number): string => `${Math.round((now - started) / 1000)}s`;

  return {
    update(done, total) {
      last = { done, total };
      const now = performance.now();
      if (now - started < delayMs) return;
      if (tty) {
        if (bar === null) {
          bar = new cliProgress.SingleBar(
            {
              stream,
              format: `${label} [{bar}] {percentage}% | {value}/{total} ${unit} | {elapsed} | ETA {eta_formatted}`,
              hideCursor: true,
              etaBuffer: 200,
            },
            cliProgress.Presets.shades_classic,
          );
          bar.start(total, done, { elapsed: elapsed(now) });
        } else {
          bar.setTotal(total);
          bar.update(done, { elapsed: elapsed(now) });
        }
      } else if (now - lastPlain >= plainEveryMs) {
        lastPlain = now;
        stream.write(`${label}: ${done}/${total} ${unit} (${elapsed(now)})\n`);
      }
    },
    stop() {
      if (bar !== null) {
        bar.update(last.done, { elapsed: elapsed(performance.now()) });
        bar.stop();
      } else if (!tty && lastPlain > Number.NEGATIVE_INFINITY) {
        stream.write(`${label}: ${last.done}/${last.total} ${unit}\n`);
      }
    },
  };
}
