import type { LedgerState } from '../events/state.js';
import type { AccountClient } from '../relay/accountClient.js';
import { age, iso } from './output.js';

export async function withAccount<T>(url: string, timeoutMs: number, concurrency: number, work: (account: AccountClient) => Promise<T>): Promise<T> {
  // undici and the relay's code are loaded only by the commands that call the account system.
  const { createAccountClient } = await import('../relay/accountClient.js');
  const account = createAccountClient({ baseUrl: url, timeoutMs, connections: Math.max(1, concurrency) });
  try {
    return await work(account);
  } finally {
    await account.close();
  }
}

export function candidateLine(row: LedgerState, now: number): string {
  const since = row.sentAt ?? row.updatedAt;
  return `${row.guid}  ${row.status}  attempts=${row.attempts}  ${row.sentAt === null ? 'updated' : 'sent'} ${iso(since)} (${age(now - since)} ago)`;
}
