/**
 * Child process for the multi-process race on PostgreSQL: claims every GUID of a shared list, in its own
 * random order, `inflight` at a time (so its claims also share group-commit batches), and prints which it
 * won. Prints "ready" once open and starts on "go" from stdin, so that all children start together.
 * Args: url count seed inflight
 */
import { openPostgresStore } from '../../../src/store/postgres/postgresStore.js';
import { raceGuids } from './raceGuids.js';
import { orThrow } from '../../../src/events/storeResult.js';
import { ledgerProjection } from '../../../src/projections/ledgerProjection.js';

const [url, countArg, seedArg, inflightArg] = process.argv.slice(2);
const count = Number(countArg);
const inflight = Number(inflightArg ?? 8);
const guids = raceGuids(count, Number(seedArg));

const store = await openPostgresStore({ projection: ledgerProjection, url: url!, applicationName: 'guidgate-claimer' });
process.stdout.write('ready\n');
await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
process.stdin.pause();
const won: string[] = [];
let next = 0;
async function worker(): Promise<void> {
  while (next < guids.length) {
    const guid = guids[next++]!;
    const r = await orThrow(store.execute(guid, { type: 'Submit', request: `{"guid":"${guid}"}`, fingerprint: guid, timeoutMs: 1000, maxAttempts: 3 }));
    if (r.kind === 'applied') won.push(guid);
    else if (r.refusal.reason !== 'exists') throw new Error(`${guid}: refused ${r.refusal.reason}`);
  }
}
await Promise.all(Array.from({ length: inflight }, worker));
await store.close();
process.stdout.write(JSON.stringify({ pid: process.pid, won }) + '\n');
process.stdin.destroy();
