/**
 * Child process for the multi-process race: claims every GUID of a shared list, in its own random order, `inflight`
 * at a time (1: one transaction per claim; more: its claims also share the store's group-commit batches), and prints
 * which it won. Prints "ready" once open and starts on "go" from stdin, so that all children start together.
 * Args: db count seed [inflight] (db: anything `openStore` takes; inflight 1 when left out)
 */
import { openStore } from '../../../src/store/openStore.js';
import { raceGuids } from './raceGuids.js';
import { sleep } from '../waitFor.js';
import { orThrow } from '../../../src/events/storeResult.js';

const [db, countArg, seedArg, inflightArg] = process.argv.slice(2);
const guids = raceGuids(Number(countArg), Number(seedArg));
const inflight = Number(inflightArg ?? 1);

const store = await openStore(db!, { busyTimeoutMs: 30_000 });
process.stdout.write('ready\n');
await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
process.stdin.pause();
const won: string[] = [];
let next = 0;
async function claimAll(): Promise<void> {
  while (next < guids.length) {
    const guid = guids[next++]!;
    const r = await orThrow(store.execute(guid, { type: 'Submit', request: `{"guid":"${guid}"}`, fingerprint: guid, timeoutMs: 1000, maxAttempts: 3 }));
    if (r.kind === 'applied') won.push(guid);
    else if (r.refusal.reason !== 'exists') throw new Error(`${guid}: refused ${r.refusal.reason}`);
    // Leave the lock free for a moment: SQLite's busy handler is not fair (a waiting process sleeps in
    // growing steps while the holder takes the lock again at once), and with fast commits one process
    // could otherwise claim everything before the others woke up, and the race would not be a race.
    await sleep(1);
  }
}
await Promise.all(Array.from({ length: inflight }, claimAll));
await store.close();
process.stdout.write(JSON.stringify({ pid: process.pid, won }) + '\n');
process.stdin.destroy();
