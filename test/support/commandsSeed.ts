import { spawn } from 'node:child_process';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { Status } from '../../src/events/codecs.js';
import type { EventStore } from '../../src/events/store.js';
import type { LedgerState } from '../../src/events/state.js';
import type { AccountClient, CallOutcome, InquiryOutcome } from '../../src/account/accountClient.js';
import { fingerprintOf } from '../../src/contract/transferRequest.js';
import { REPO_ROOT, runToEnd } from './children.js';
import { orThrow } from '../../src/events/storeResult.js';

/** A valid channel body for `guid` and its fingerprint, as the relay computes it. */
export function transferBody(guid: string, over: Record<string, unknown> = {}): { body: string; fingerprint: string } {
  const t = { guid, from: 'ACC-6222021001', to: 'ACC-6222021002', amount: 1500, currency: 'CNY', ...over };
  return { body: JSON.stringify(t), fingerprint: fingerprintOf(t) };
}

const ok = async (p: ReturnType<EventStore['execute']>): Promise<LedgerState> => {
  const r = await orThrow(p);
  if (r.kind !== 'applied') throw new Error(`seed step refused: ${r.refusal.reason}`);
  return r.state;
};

/**
 * Puts one GUID into `status` through the store's own commands (so the log and the projection agree), at the
 * store's clock: open the store with an old clock to make the row old. FAILED rows get `attempts` sends.
 */
export async function seedRow(
  store: EventStore,
  guid: string,
  status: Status,
  opts: { attempts?: number; body?: string; fingerprint?: string; response?: string; timeoutMs?: number } = {},
): Promise<LedgerState> {
  const t = transferBody(guid);
  const request = opts.body ?? t.body;
  const fingerprint = opts.fingerprint ?? t.fingerprint;
  const timeoutMs = opts.timeoutMs ?? 1000;
  if (status === 'RECEIVED') return ok(store.execute(guid, { type: 'Claim', request, fingerprint }));
  let state = await ok(store.execute(guid, { type: 'Submit', request, fingerprint, timeoutMs, maxAttempts: 100 }));
  switch (status) {
    case 'SENT':
      return state;
    case 'UNKNOWN':
      return ok(store.execute(guid, { type: 'RecordTimeout', attempt: 1, reason: 'timeout' }));
    case 'DONE':
    case 'PURGED':
      state = await ok(store.execute(guid, { type: 'RecordAnswer', attempt: 1, code: '0000', response: opts.response ?? `{"guid":"${guid}","code":"0000","message":"transfer done"}`, latencyMs: 5 }));
      return status === 'DONE' ? state : ok(store.execute(guid, { type: 'Purge', retentionMs: 0 }));
    case 'FAILED': {
      state = await ok(store.execute(guid, { type: 'RecordConnectFailure', attempt: 1, reason: 'refused' }));
      for (let a = 2; a <= (opts.attempts ?? 1); a++) {
        await ok(store.execute(guid, { type: 'Send', timeoutMs, maxAttempts: 100 }));
        state = await ok(store.execute(guid, { type: 'RecordConnectFailure', attempt: a, reason: 'refused' }));
      }
      return state;
    }
  }
}

/** Every row of the log and the projection, to show that something changed nothing. */
export function snapshot(dbPath: string): { events: unknown[]; ledger: unknown[] } {
  const db = new Database(dbPath, { readonly: true });
  try {
    return {
      events: db.prepare('SELECT * FROM events ORDER BY position').all(),
      ledger: db.prepare('SELECT * FROM ledger ORDER BY guid').all(),
    };
  } finally {
    db.close();
  }
}

/** An account client that counts what goes through it (and can act in the middle of an inquiry). */
export function countingAccount(inner: AccountClient, onInquire?: (guid: string) => Promise<void>) {
  const inquiries = new Map<string, number>();
  const transfers: string[] = [];
  const client: AccountClient = {
    async transfer(body: string | Uint8Array, guid: string): Promise<CallOutcome> {
      transfers.push(typeof body === 'string' ? body : Buffer.from(body).toString('utf8'));
      return inner.transfer(body, guid);
    },
    async inquire(guid: string): Promise<InquiryOutcome> {
      inquiries.set(guid, (inquiries.get(guid) ?? 0) + 1);
      const answer = await inner.inquire(guid);
      await onInquire?.(guid);
      return answer;
    },
    close: () => inner.close(),
  };
  return { client, inquiries, transfers, totalInquiries: () => [...inquiries.values()].reduce((a, b) => a + b, 0) };
}

const BIN = join(REPO_ROOT, 'bin', 'guidgate');

/** This process's environment without GUIDGATE_*: the test runner's own must not leak into a command. */
export const withoutGuidgateEnv = (): Record<string, string | undefined> => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GUIDGATE_')));

/** `guidgate …` as a real process (the build must be current: npm test builds first). */
export async function cli(args: string[], env: Record<string, string> = {}, opts: { cwd?: string; killAfterMs?: number } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...withoutGuidgateEnv(), ...env }, ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }) });
  // A command expected to end that does not (a server that started after all) is killed: its exit code is then null.
  const killer = opts.killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), opts.killAfterMs);
  try {
    return await runToEnd(child);
  } finally {
    clearTimeout(killer);
  }
}
