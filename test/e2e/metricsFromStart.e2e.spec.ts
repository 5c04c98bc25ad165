import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPLY_CODES } from '../../src/contract/codes.js';
import { REPO_ROOT } from '../support/children.js';
import { httpRequest } from '../support/relayHarness.js';
import { exited, startServe } from '../support/serveProcess.js';
import { useTempDir } from '../support/tmp.js';

/**
 * What a fresh `serve` process says before anything has happened: where its console and metrics are, which build it
 * is, and every labelled series the alert rules and the dashboard take a rate() of, at 0. A series that appears only
 * at its first increment hides that increment from rate() and increase() (Prometheus sees it start at 1, not go
 * from 0 to 1): the first E503s after a start would not page.
 */
describe('a fresh relay: its startup lines and its /metrics before the first transfer', () => {
  const tmp = useTempDir('file');
  let relay: ReturnType<typeof startServe>;
  let url: string;
  let metrics: string;

  beforeAll(async () => {
    relay = startServe(['--db', join(tmp(), 'ledger.db'), '--settle-every', '0']);
    url = await relay.ready;
    // The first request this relay answers.
    const scraped = await httpRequest(`${url}/metrics`, { method: 'GET' });
    expect(scraped.status).toBe(200);
    metrics = scraped.body;
  }, 60_000);

  afterAll(async () => {
    if (relay?.child.exitCode === null) {
      relay.child.kill('SIGTERM');
      await exited(relay.child);
    }
  });

  const sample = (series: string): number | undefined => {
    const line = metrics.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? undefined : Number(line.slice(series.length + 1));
  };

  it('names the console and the metrics beside the URL it listens on', () => {
    expect(relay.output()).toContain(`listening on ${url}\n  console: ${url}/console/\n  metrics: ${url}/metrics\n`);
  });

  it('guidgate_build_info gives the version, the Node.js and the kind of ledger', () => {
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(sample(`guidgate_build_info{version="${version}",node="${process.version}",store="sqlite"}`)).toBe(1);
  });

  it('every guidgate counter and histogram has its series at 0, every known label set of each', () => {
    const families = [...metrics.matchAll(/^# TYPE (guidgate_\S+) (counter|histogram)$/gm)].map((m) => ({ name: m[1]!, type: m[2]! }));
    expect(families.length).toBeGreaterThanOrEqual(10);
    const withoutSeries = families.filter(({ name, type }) => !metrics.split('\n').some((l) => l.startsWith(type === 'histogram' ? `${name}_count` : name) && !l.startsWith('#')));
    expect(withoutSeries).toEqual([]);
    // The alert on E503 (GuidgateLedgerUnavailable) takes the rate of this series: every code the relay answers, on every route.
    for (const code of [...Object.keys(REPLY_CODES), '0000', 'E500']) {
      for (const route of ['channel', 'operator', 'unmatched']) expect(sample(`guidgate_replies_total{code="${code}",route="${route}"}`), `${code} ${route}`).toBe(0);
    }
    for (const outcome of ['definite', 'unknown', 'failed']) {
      expect(sample(`guidgate_account_calls_total{outcome="${outcome}"}`), outcome).toBe(0);
      expect(sample(`guidgate_account_call_duration_seconds_count{outcome="${outcome}"}`), outcome).toBe(0);
    }
    for (const reason of ['max-connections', 'max-connections-per-address', 'idle-for-new']) {
      expect(sample(`guidgate_connections_closed_total{reason="${reason}"}`), reason).toBe(0);
    }
  });
});
