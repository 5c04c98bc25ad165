import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type Simulator } from '../../src/simulator/index.js';
import { REPO_ROOT } from '../support/children.js';
import { httpRequest } from '../support/relayHarness.js';
import { exited, startServe } from '../support/serveProcess.js';
import { noConnectionLeft } from '../support/tcpStates.js';
import { useTempDir } from '../support/tmp.js';
import { waitFor } from '../support/waitFor.js';

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly code?: string;
  readonly guid?: string;
}
const WARN = 40;

/**
 * `serve --log-level warn` keeps every line an operator must see and drops the routine ones: a transfer answered
 * 0000 writes nothing, one sent with its outcome unknown (E901) or not sent (E902) writes its line at warn, and the
 * breaker says when it opens and when it closes. What the alerts and the docs quote from the log is at warn or error.
 */
describe('serve --log-level warn: only what needs attention', () => {
  const tmp = useTempDir('file');
  let sim: Simulator;
  let relay: ReturnType<typeof startServe>;
  let url: string;
  const run = Date.now().toString(36);

  // startServe runs serve with --log-level warn.
  beforeAll(async () => {
    sim = await startSimulator({ port: 0, faults: { byGuidPrefix: { [`held-${run}`]: 'hold' } } });
    relay = startServe(['--db', join(tmp(), 'ledger.db'), '--account-url', sim.url, '--settle-every', '0', '--timeout', '2s', '--breaker-failures', '3', '--breaker-cooldown', '500ms']);
    url = await relay.ready;
  }, 60_000);

  afterAll(async () => {
    if (relay?.child.exitCode === null) {
      relay.child.kill('SIGTERM');
      await exited(relay.child);
    }
    await sim?.close();
  });

  const post = async (guid: string) =>
    (await httpRequest(`${url}/v1/transfers`, { method: 'POST', body: JSON.stringify({ guid, from: '6222021001', to: '6222021002', amount: 1500, currency: 'CNY' }) })).json()['code'];
  /** The JSON log lines written so far (the startup lines before them are plain text). */
  const logLines = (): LogLine[] => relay.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as LogLine);

  it('a transfer answered 0000 writes no line; one answered E901 or E902 writes its line at warn', async () => {
    for (let i = 0; i < 20; i++) expect(await post(`ok-${run}-${i}`)).toBe('0000');
    expect(await post(`held-${run}`)).toBe('E901');
    // Long enough that the relay's idle connections close and its claim is synced first on a loaded machine: with
    // 2 s, the refusal had once ended before the call, which then went through (0000).
    const refusing = sim.refuseConnections(6000);
    await noConnectionLeft(relay.child.pid!, sim.port);
    expect(await post(`refused-${run}`)).toBe('E902');
    await waitFor(() => logLines().some((l) => l.guid === `refused-${run}`));
    const transfers = logLines().filter((l) => l.msg === 'transfer');
    expect(transfers.map((l) => [l.guid, l.code, l.level])).toEqual([[`held-${run}`, 'E901', WARN], [`refused-${run}`, 'E902', WARN]]);
    await refusing;
  });

  it('the breaker says at warn when it opens and when it closes again', async () => {
    const refusing = sim.refuseConnections(1500);
    await noConnectionLeft(relay.child.pid!, sim.port);
    for (let i = 0; i < 3; i++) expect(await post(`trip-${run}-${i}`)).toBe('E902');
    await waitFor(() => logLines().some((l) => l.msg.startsWith('breaker open')));
    await refusing;
    // After the cooldown the next transfer is the trial call; answered, it closes the breaker.
    await waitFor(async () => (await post(`trial-${run}-${Date.now()}`)) === '0000', { timeoutMs: 10_000, intervalMs: 100 });
    await waitFor(() => logLines().some((l) => l.msg.startsWith('breaker closed')));
    const breaker = logLines().filter((l) => l.msg.startsWith('breaker'));
    expect(breaker.map((l) => [l.msg.split(':')[0], l.level])).toEqual([['breaker open', WARN], ['breaker closed', WARN]]);
  });

  it('every log message the alerts and the docs quote is written at warn or error', () => {
    // [file, the logging call as written]: a level changed to info (or lower) fails here.
    const calls: ReadonlyArray<readonly [string, RegExp]> = [
      ['src/send/sendClaimed.ts', /sendLog\?\.error\(line, `possible double application of GUID/],
      ['src/send/sendClaimed.ts', /sendLog\?\.warn\(\s*\{[^}]*\},?\s*['`][^'`]*(?:send window|withheld)/],
      ['src/relay/app.ts', /log\.error\(\{ lost, reason: why \}, 'request records lost'\)/],
      ['src/relay/replies.ts', /logger\.error\(line, 'ledger unavailable'\)/],
      ['src/wiring/serve.ts', /log\.error\(\{ reason \}, 'ledger file lost/],
      ['src/wiring/serve.ts', /if \(e\.kind === 'none'\) log\.error\(/],
      ['src/wiring/serve.ts', /else log\.warn\(\{ host: e\.host, previous: e\.previous \}, hostLine\(e\)\)/],
      ['src/wiring/serve.ts', /log\.error\([^\n]*'SIGHUP: keys file refused/],
      ['src/events/continuity.ts', /log\('error',\s*\{[^}]*\},\s*`the ledger went back \(\$\{why\}\): until/],
      ['src/events/continuity.ts', /\bwarn\([^\n]*'continuity window ended/],
      ['src/relay/breaker.ts', /log\?\.warn\([^\n]*'breaker open/],
      ['src/relay/breaker.ts', /log\?\.warn\([^\n]*'breaker closed/],
    ];
    const missing = calls.filter(([file, call]) => !call.test(readFileSync(join(REPO_ROOT, file), 'utf8'))).map(([file, call]) => `${file}: ${call.source}`);
    expect(missing).toEqual([]);
  });
});
