import { spawn } from 'node:child_process';

/**
 * Telling systemd how `serve` stands (`Type=notify`, sd_notify(3)): READY=1 once a transfer would be accepted (what
 * /healthz says), WATCHDOG=1 while the event loop runs, STOPPING=1 at shutdown, and a STATUS line for `systemctl
 * status`. Node has no unix datagram sockets, so each message is sent by `systemd-notify` (part of systemd, on every
 * host that runs the unit; the unit's NotifyAccess=all lets systemd take it from that child). It waits until systemd
 * has read the message (its barrier), so that systemd still knows whose it is when it reads it.
 */
export interface SystemdNotifyOptions {
  /** NOTIFY_SOCKET (set by systemd for Type=notify), WATCHDOG_USEC and WATCHDOG_PID are read from here. */
  readonly env: NodeJS.ProcessEnv;
  /** Why a new transfer would get E503 now, or null: the readiness /healthz answers with. */
  readonly readiness: () => Promise<string | null>;
  /** What the status line says once ready. */
  readonly readyStatus: string;
  readonly log: { warn(line: Record<string, unknown>, message: string): void };
  /** How often readiness is asked until it holds (ms). */
  readonly checkEveryMs?: number;
  /** The program that sends a message (tests: another). */
  readonly notifyProgram?: string;
}

export interface SystemdNotifier {
  /** Resolves once READY=1 was sent. */
  readonly ready: Promise<void>;
  /** STOPPING=1, and no more pings or readiness checks. */
  stopping(): Promise<void>;
}

/** The watchdog's interval (WATCHDOG_USEC, for this process), or null when systemd watches none. */
export function watchdogMs(env: NodeJS.ProcessEnv, pid: number): number | null {
  const usec = Number(env['WATCHDOG_USEC']);
  if (!Number.isSafeInteger(usec) || usec <= 0) return null;
  const forPid = env['WATCHDOG_PID'];
  if (forPid !== undefined && forPid !== '' && Number(forPid) !== pid) return null;
  return Math.max(1, Math.floor(usec / 1000));
}

/** Starts telling systemd; null when not run by it as Type=notify (no NOTIFY_SOCKET). */
export function notifySystemd(opts: SystemdNotifyOptions): SystemdNotifier | null {
  if (opts.env['NOTIFY_SOCKET'] === undefined || opts.env['NOTIFY_SOCKET'] === '') return null;
  const program = opts.notifyProgram ?? 'systemd-notify';
  let sending: Promise<void> = Promise.resolve();
  let warned = false;
  // One message at a time, in order: READY=1 is never overtaken by a later STOPPING=1.
  const send = (args: readonly string[]): Promise<void> => {
    sending = sending.then(
      () =>
        new Promise<void>((done) => {
          const child = spawn(program, args, { env: opts.env, stdio: ['ignore', 'ignore', 'pipe'] });
          let stderr = '';
          child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
          child.once('error', (err) => {
            if (!warned) opts.log.warn({ program, error: err.message }, 'cannot tell systemd how serve stands: systemd-notify did not run (Type=notify waits for READY=1)');
            warned = true;
            done();
          });
          child.once('close', (code) => {
            if (code !== 0 && !warned) opts.log.warn({ program, args, code, stderr: stderr.trim() }, 'systemd-notify failed');
            if (code !== 0) warned = true;
            done();
          });
        }),
    );
    return sending;
  };

  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const everyMs = opts.checkEveryMs ?? 1000;
  const ready = new Promise<void>((resolveReady) => {
    let said: string | null = null;
    const check = async (): Promise<void> => {
      if (stopped) return;
      const why = await opts.readiness().catch((err: unknown) => (err instanceof Error ? err.message : String(err)));
      if (stopped) return;
      if (why === null) {
        await send(['--ready', `--status=${opts.readyStatus}`]);
        resolveReady();
        return;
      }
      if (why !== said) await send([`--status=not ready (/healthz would say 503): ${why}`]);
      said = why;
      timer = setTimeout(() => void check(), everyMs);
    };
    void check();
  });

  const pingEveryMs = watchdogMs(opts.env, process.pid);
  // Half the watchdog's interval, as sd_watchdog_enabled(3) advises: one late ping does not kill the relay.
  const pinger = pingEveryMs === null ? undefined : setInterval(() => void send(['WATCHDOG=1']), Math.max(1, Math.floor(pingEveryMs / 2)));
  pinger?.unref();

  return {
    ready,
    async stopping() {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      clearInterval(pinger);
      await send(['--status=stopping: finishing the calls in flight', 'STOPPING=1']);
    },
  };
}
