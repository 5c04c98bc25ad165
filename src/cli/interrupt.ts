import { err, type Exit } from './output.js';

/**
 * SIGINT/SIGTERM during a run: stop starting new rows, let the ones in flight finish and be recorded, print
 * the summary, exit 1. A second signal ends the process at once (every change is atomic; a send cut short is
 * a SENT row that the orphan sweep makes UNKNOWN).
 */
export function interruptible(command: string): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    dispose();
    err(`guidgate ${command}: ${sig}: finishing the rows in flight, then stopping (send it again to stop at once)`);
    controller.abort();
  };
  const dispose = (): void => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return { signal: controller.signal, dispose };
}

export function interruptedExit(command: string, signal: AbortSignal, code: Exit): Exit {
  if (!signal.aborted) return code;
  err(`guidgate ${command}: interrupted; rows not reached are unchanged`);
  return 1;
}

/**
 * Resolves on the first SIGTERM or SIGINT. A server command calls it before it starts: a signal sent as soon as
 * its "listening on" line is read then stops it gracefully, instead of finding no handler yet and killing it.
 */
export function stopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = (sig: NodeJS.Signals): void => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      resolve(sig);
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
}
