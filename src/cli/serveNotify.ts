import { readFileSync, statSync } from 'node:fs';
import type { Command } from 'commander';
import * as E from 'fp-ts/lib/Either.js';
import type { ServeOptions } from '../wiring/serve.js';
import { MIN_SECRET_BYTES, notifySecret } from '../send/notifier.js';
import { DEFAULTS } from '../shared/defaults.js';
import { flag, shownDefault, timeLimitArg, urlArg } from './options.js';

/** `serve`'s notification flags (CONTRACT.md §11). */
export function addNotifyOptions(serve: Command): Command {
  return serve
    .addOption(flag('--notify-url <url>', 'POST signed notifications (transfer.settled, transfer.dead_letter) to this URL (http or https; with --notify-secret-file)').argParser(urlArg))
    .addOption(flag('--notify-secret-file <path>', `the signing secret of the notifications: a file readable by its owner only, at least ${MIN_SECRET_BYTES} bytes`))
    .addOption(flag('--notify-ca <path>', "CA certificates (PEM) an https:// --notify-url's certificate must chain to, instead of the system's"))
    .addOption(flag('--notify-timeout <duration>', 'one delivery attempt gets an answer within this, else it is tried again later').argParser(timeLimitArg).default(DEFAULTS.notifyTimeoutMs, shownDefault(DEFAULTS.notifyTimeoutMs)))
    .addOption(flag('--notify-for <duration>', 'a notification not delivered within this of being recorded is given up').argParser(timeLimitArg).default(DEFAULTS.notifyForMs, shownDefault(DEFAULTS.notifyForMs)));
}

export interface NotifyFlags {
  readonly notifyUrl?: string;
  readonly notifySecretFile?: string;
  readonly notifyCa?: string;
  readonly notifyTimeout: number;
  readonly notifyFor: number;
}

/** The flags as `serve`'s `notify` option, or a bad-usage message (exit 2) naming the flag. The secret never reaches a message. */
export function notifyOptions(o: NotifyFlags): E.Either<string, Pick<ServeOptions, 'notify'>> {
  if (o.notifyUrl === undefined) {
    if (o.notifySecretFile !== undefined || o.notifyCa !== undefined) return E.left('--notify-secret-file and --notify-ca need --notify-url');
    return E.right({});
  }
  const path = o.notifySecretFile;
  if (path === undefined) return E.left('--notify-url needs --notify-secret-file (the signing secret)');
  let file: Buffer;
  try {
    const st = statSync(path);
    if (!st.isFile()) return E.left(`--notify-secret-file: ${path} is not a file`);
    // Owner only: anyone else who can read it can forge notifications.
    if (process.platform !== 'win32' && (st.mode & 0o077) !== 0) {
      return E.left(`--notify-secret-file: ${path} is readable by others (mode ${(st.mode & 0o777).toString(8)}); chmod 600 it`);
    }
    file = readFileSync(path);
  } catch (err) {
    return E.left(`--notify-secret-file: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const secret = notifySecret(file);
  if (secret.length < MIN_SECRET_BYTES) return E.left(`--notify-secret-file: ${path} holds ${secret.length} bytes; a secret needs at least ${MIN_SECRET_BYTES}`);
  let ca: Buffer | undefined;
  if (o.notifyCa !== undefined) {
    if (!o.notifyUrl.startsWith('https:')) return E.left('--notify-ca needs an https:// --notify-url');
    try {
      ca = readFileSync(o.notifyCa);
    } catch (err) {
      return E.left(`--notify-ca: cannot read ${o.notifyCa} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  return E.right({ notify: { url: o.notifyUrl, secret, timeoutMs: o.notifyTimeout, forMs: o.notifyFor, ...(ca === undefined ? {} : { ca }) } });
}

export function notifyOptionsOrExit(cmd: Command, o: NotifyFlags): Pick<ServeOptions, 'notify'> {
  const result = notifyOptions(o);
  if (E.isLeft(result)) return cmd.error(`guidgate: ${result.left}`, { exitCode: 2, code: 'guidgate.usage' });
  return result.right;
}
