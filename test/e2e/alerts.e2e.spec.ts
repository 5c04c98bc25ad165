/**
 * The alerts and the dashboard that ship with guidgate (deploy/): promtool checks and unit-tests the rules, and
 * every metric name the rules and the dashboard's queries use must be one a real relay's GET /metrics exposes.
 */
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, it, expect } from 'vitest';
import { REPO_ROOT } from '../support/children.js';
import { startHarness, type Harness } from '../support/relayHarness.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';

const run = promisify(execFile);
const RULES_DIR = join(REPO_ROOT, 'deploy', 'prometheus');
const RULES = join(RULES_DIR, 'guidgate.rules.yml');
const DASHBOARD = join(REPO_ROOT, 'deploy', 'grafana', 'guidgate.json');

async function promtool(): Promise<string | null> {
  try {
    await run('promtool', ['--version']);
    return 'promtool';
  } catch {
    return null;
  }
}

/** Every `guidgate_…` metric name in a PromQL text (alert names are capitalised, so they do not match). */
const metricNames = (text: string): string[] => [...new Set(text.match(/\bguidgate_[a-z0-9_]+\b/g) ?? [])];

/** The series names a /metrics text exposes: each declared metric, with a histogram's _bucket, _sum and _count. */
function exposedNames(metrics: string): Set<string> {
  const names = new Set<string>();
  for (const m of metrics.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m;
    names.add(name!);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(`${name}${s}`);
  }
  return names;
}

/** Every `expr` of every panel target in the dashboard (rows may nest panels). */
function dashboardQueries(dashboard: unknown): string[] {
  const out: string[] = [];
  const visit = (panels: unknown): void => {
    if (!Array.isArray(panels)) return;
    for (const p of panels as Array<{ targets?: Array<{ expr?: unknown }>; panels?: unknown }>) {
      for (const t of p.targets ?? []) if (typeof t.expr === 'string') out.push(t.expr);
      visit(p.panels);
    }
  };
  visit((dashboard as { panels?: unknown }).panels);
  return out;
}

describe('alerts and dashboard (deploy/)', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();
  const harness = async (dir: string, opts: Parameters<typeof startHarness>[1] = {}): Promise<Harness> => cleanup.use(await startHarness(dir, opts));

  it('promtool check rules and promtool test rules pass', async (ctx) => {
    const tool = await promtool();
    if (tool === null) {
      // Under CI the check is required; on a developer's machine without Prometheus it is skipped, loudly.
      if (process.env['CI'] === 'true') throw new Error('promtool is required under CI=true (Debian package prometheus)');
      console.warn('SKIPPED: promtool not found (apt-get install prometheus); the alert rules were not checked');
      ctx.skip();
      return;
    }
    const check = await run(tool, ['check', 'rules', RULES]);
    // Every rule in the file is parsed: the count is the file's own, so a new alert cannot be left unchecked.
    const declared = (readFileSync(RULES, 'utf8').match(/^\s*- (?:alert|record):/gm) ?? []).length;
    expect(declared).toBeGreaterThan(0);
    expect(check.stdout).toContain(`SUCCESS: ${declared} rules found`);
    const test = await run(tool, ['test', 'rules', 'guidgate.rules.test.yml'], { cwd: RULES_DIR });
    expect(test.stdout).toMatch(/SUCCESS/);

    // The dashboard's queries are PromQL promtool parses (each as a recording rule, the instance variable as Grafana
    // expands "All": a regex matching every instance).
    const queries = dashboardQueries(JSON.parse(readFileSync(DASHBOARD, 'utf8')));
    const file = join(tmp(), 'dashboard.rules.yml');
    const rules = queries.map((q, i) => `      - record: dashboard:query_${i}\n        expr: ${JSON.stringify(q.replaceAll('$instance', '.+'))}`);
    writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${rules.join('\n')}\n`);
    const parsed = await run(tool, ['check', 'rules', file]);
    expect(parsed.stdout).toContain(`SUCCESS: ${queries.length} rules found`);
  });

  it('pages for a relay that is down, and names what the dead-letter alert can list them with', () => {
    const rules = readFileSync(RULES, 'utf8');
    expect(rules).toMatch(/alert: GuidgateDown\n(?:\s+#.*\n)*\s+expr: up\{job="guidgate"\} == 0\n/);
    // `guidgate stats` only counts dead letters; `ledger --status FAILED` and the console list them.
    const deadLetters = rules.slice(rules.indexOf('alert: GuidgateDeadLetters'), rules.indexOf('alert: GuidgateBreakerOpen'));
    expect(deadLetters).not.toContain('`guidgate stats` lists');
    expect(deadLetters).toContain('`guidgate ledger --status FAILED` lists them');
  });

  it('the dashboard has an instance variable, and every query keeps to the instances chosen', () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { templating: { list: Array<{ name: string; type: string; query?: unknown; includeAll?: boolean }> } };
    const instance = dashboard.templating.list.find((v) => v.name === 'instance');
    expect(instance).toMatchObject({ type: 'query', includeAll: true, query: { query: 'label_values(guidgate_replies_total, instance)' } });
    const queries = dashboardQueries(dashboard);
    const unscoped = queries.flatMap((q) => [...q.matchAll(/\b(guidgate_[a-z0-9_]+|up)\b(\{[^}]*\})?/g)].filter((m) => !(m[2] ?? '').includes('instance=~"$instance"')).map((m) => `${m[0]} in ${q}`));
    expect(unscoped).toEqual([]);
    const used = metricNames(queries.join('\n'));
    for (const m of ['guidgate_request_records_lost_total', 'guidgate_stale_answers_total', 'guidgate_sends_withheld_total', 'guidgate_connections_closed_total']) expect(used).toContain(m);
    expect(queries.some((q) => q.includes('up{'))).toBe(true);
  });

  it('every metric the rules and the dashboard use is exposed by a real relay', async () => {
    const h = await harness(tmp(), { relay: { settleEveryMs: 100 } });
    const metrics = await h.get('/metrics');
    expect(metrics.status).toBe(200);
    const exposed = exposedNames(metrics.body);

    const dashboard: unknown = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
    const queries = dashboardQueries(dashboard);
    expect(queries.length).toBeGreaterThanOrEqual(10);
    const used = { rules: metricNames(readFileSync(RULES, 'utf8')), dashboard: metricNames(queries.join('\n')) };
    expect(used.rules.length).toBeGreaterThanOrEqual(5);
    // A relay on PostgreSQL exports the durability report too (test/e2e/postgresFailover.e2e.spec.ts reads it there).
    const postgresOnly = new Set(['guidgate_pg_synchronous_standbys']);
    const missing = (names: string[]) => names.filter((n) => !exposed.has(n) && !postgresOnly.has(n));
    expect({ rules: missing(used.rules), dashboard: missing(used.dashboard) }).toEqual({ rules: [], dashboard: [] });
    expect(exposed.has('guidgate_pg_synchronous_standbys'), 'a SQLite relay never reports a synchronous standby count').toBe(false);
    // And the ones the alerts of CONTRACT.md §7 need are all among them.
    for (const needed of ['guidgate_oldest_row_age_seconds', 'guidgate_dead_letters', 'guidgate_breaker_open', 'guidgate_replies_total', 'guidgate_settle_last_run_timestamp_seconds', 'guidgate_request_records_lost_total']) {
      expect(used.rules).toContain(needed);
    }
  });
});
