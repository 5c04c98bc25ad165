/**
 * Child process for the multi-process race: claims every GUID of a shared list, in its own random order,
 * one transaction per claim, and prints which it won. Prints "ready" once open and starts on "go" from
 * stdin, so that all children start together. Args: db count seed (db: anything `openStore` takes)
 */
import { openStore } from '../../../src/store/openStore.js';
import { raceGuids } from './raceGuids.js';
import { sleep } from '../waitFor.js';
import { orThrow } from '../../../src/events/storeResult.js';

const [dbPath, countArg, seedArg] = process.argv.slice(2);
const count = Number(countArg);
const guids = raceGuids(count, Number(seedArg));

const store = await openStore(dbPath!, { busyTimeoutMs: 30_000 });
process.stdout.write('ready\n');
await new Promise<void>((resolve) => process.stdin.once('data', () => resolve()));
process.stdin.pause();
const won: string[] = [];
for (const guid of guids) {
  const r = await orThrow(store.execute(guid, { type: 'Submit', request: `{"guid":"${guid}"}`, fingerprint: guid, timeoutMs: 1000, maxAttempts: 3 }));
  if (r.kind === 'applied') won.push(guid);
  // Leave the lock free for a moment: SQLite's busy handler is not fair (a waiting process sleeps in
  // growing steps while the holder takes the lock again at once), and with fast commits one process
  // could otherwise claim everything before the others woke up, and the race would not be a race.
  await sleep(1);
}
await store.close();
process.stdout.write(JSON.stringify({ pid: process.pid, won }) + '\n');
process.stdin.destroy();
