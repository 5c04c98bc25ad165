/**
 * The console page. Everything from the relay is put on the page as text (textContent, attributes set one by
 * one): account answers and a channel's extra fields are data, never markup. The page's CSP forbids inline
 * script besides.
 */
import {
  STATUSES, forgetSession, getLedger, getReconciliation, getReconciliations, getStats, getTimeline, runAction, saveSession, savedSession,
  type Action, type ActionResult, type ApiError, type Instant, type Reconciliation, type ReconciliationBreak, type ReconciliationRun, type Row, type Stats, type Status, type TimelineEntry, type NotificationShown,
} from './api.js';
import { formatMoney } from '../shared/money.js';
import { counted } from '../shared/plural.js';

/** Rows per page: 50, or `?rows=N` in the page's address (1 to 500, the API's limit). */
const PAGE_SIZE = ((): number => {
  const n = Number(new URLSearchParams(location.search).get('rows') ?? '');
  return Number.isInteger(n) && n >= 1 && n <= 500 ? n : 50;
})();

// ---- the page's elements ----

function byId<T extends HTMLElement>(id: string, type: new () => T): T {
  const el = document.getElementById(id);
  if (!(el instanceof type)) throw new Error(`the page has no #${id}`);
  return el;
}

const ui = {
  login: byId('login', HTMLFormElement),
  token: byId('token', HTMLInputElement),
  logout: byId('logout', HTMLButtonElement),
  session: byId('session', HTMLElement),
  main: byId('main', HTMLElement),
  refresh: byId('refresh', HTMLButtonElement),
  autoRefresh: byId('auto-refresh', HTMLInputElement),
  refreshEvery: byId('refresh-every', HTMLSelectElement),
  trendReplies: byId('trend-replies', HTMLElement),
  trendUnsettled: byId('trend-unsettled', HTMLElement),
  overviewStatus: byId('overview-status', HTMLElement),
  counts: byId('counts', HTMLTableElement),
  facts: byId('facts', HTMLElement),
  replies: byId('replies', HTMLTableElement),
  filter: byId('filter', HTMLFormElement),
  statusChoices: byId('status-choices', HTMLElement),
  olderThan: byId('older-than', HTMLInputElement),
  rowsStatus: byId('rows-status', HTMLElement),
  rows: byId('rows', HTMLTableElement),
  firstPage: byId('first-page', HTMLButtonElement),
  nextPage: byId('next-page', HTMLButtonElement),
  find: byId('find', HTMLFormElement),
  guid: byId('guid', HTMLInputElement),
  transferTitle: byId('transfer-title', HTMLElement),
  transferStatus: byId('transfer-status', HTMLElement),
  transfer: byId('transfer', HTMLElement),
  rowFacts: byId('row-facts', HTMLElement),
  timeline: byId('timeline', HTMLTableElement),
  actionNote: byId('action-note', HTMLElement),
  action: byId('action', HTMLFormElement),
  minAge: byId('min-age', HTMLInputElement),
  previewResolve: byId('preview-resolve', HTMLButtonElement),
  previewReprocess: byId('preview-reprocess', HTMLButtonElement),
  preview: byId('preview', HTMLElement),
  previewTitle: byId('preview-title', HTMLElement),
  previewFacts: byId('preview-facts', HTMLElement),
  confirm: byId('confirm', HTMLButtonElement),
  cancel: byId('cancel', HTMLButtonElement),
  actionStatus: byId('action-status', HTMLElement),
  reconRefresh: byId('recon-refresh', HTMLButtonElement),
  reconNext: byId('recon-next', HTMLButtonElement),
  reconFirst: byId('recon-first', HTMLButtonElement),
  reconStatus: byId('recon-status', HTMLElement),
  recon: byId('recon', HTMLElement),
  reconList: byId('recon-list', HTMLElement),
  reconRuns: byId('recon-runs', HTMLTableElement),
  reconOlder: byId('recon-older', HTMLButtonElement),
  reconFacts: byId('recon-facts', HTMLElement),
  reconCounts: byId('recon-counts', HTMLTableElement),
  reconP1: byId('recon-p1', HTMLTableElement),
  reconP2: byId('recon-p2', HTMLTableElement),
};

type Child = Node | string | null;

/** An element with text children (strings become text nodes) and attributes set one by one. */
function h(tag: string, attrs: Record<string, string> = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  for (const c of children) if (c !== null) el.append(c);
  return el;
}

function say(el: HTMLElement, text: string, tone: 'info' | 'ok' | 'error' = 'info'): void {
  el.classList.toggle('error', tone === 'error');
  el.classList.toggle('ok', tone === 'ok');
  el.textContent = text;
}

const describeError = (e: ApiError) => `${e.code}: ${e.message}${e.field === undefined ? '' : ` (field: ${e.field})`}`;

/** A refused token is the session's business: say so at the Token field, whichever call met it. */
function failed(where: HTMLElement, e: ApiError): void {
  say(where, describeError(e), 'error');
  if (e.status === 401) {
    signedOutView();
    say(ui.session, `The token was refused (${e.code}): ${e.message}. Enter a valid token.`, 'error');
  }
}

// ---- times ----

function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3600)}h`;
}

/** `<time>` in UTC to the millisecond (an audit reads exact times), with its age. */
function time(t: Instant | null | undefined, withAge = true): Node {
  if (t === null || t === undefined) return document.createTextNode('—');
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return document.createTextNode(String(t));
  const text = d.toISOString().replace('T', ' ').replace('Z', '');
  return h('time', { datetime: d.toISOString() }, withAge ? `${text} (${age(Date.now() - d.getTime())} ago)` : text);
}

// ---- small renderers ----

const badge = (status: string) => h('span', { class: `badge ${status}` }, status);

/**
 * A row's code as an operator should read it. A FAILED row one of whose attempts left (`failedByInquiry`: an inquiry
 * found no record of it, or an older attempt was answered after it was sent again) keeps the code E902, "not sent",
 * but it was sent, and a resend inquires first. In the list the row alone cannot say which; a transfer's timeline can.
 */
const codeText = (row: Row): string => (row.failedByInquiry === true ? 'sent, may have arrived (a resend inquires first)' : scalar(row.code));

/** As codeText, for one transfer whose timeline is known: an inquiry that said absent, or an older attempt answered. */
function transferCodeText(row: Row, timeline: readonly TimelineEntry[]): string {
  if (row.failedByInquiry !== true) return codeText(row);
  return timeline.some((e) => e.kind === 'event' && e.type === 'StaleAnswer')
    ? 'sent: an older attempt was answered after it was sent again (StaleAnswer); a resend inquires first'
    : 'sent, account system has no record (inquiry); a resend inquires first';
}

function guidLink(guid: string): HTMLElement {
  return h('a', { href: `#guid=${encodeURIComponent(guid)}` }, guid);
}

function scalar(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return JSON.stringify(v);
}

/** An object as "key: value" pairs on one line; anything else as itself. */
function pairs(v: unknown): string {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return scalar(v);
  return Object.entries(v as Record<string, unknown>)
    .filter(([, x]) => x !== null && x !== undefined)
    .map(([k, x]) => `${k}: ${scalar(x)}`)
    .join(', ');
}

/**
 * Who wrote an event, as the audit trail records it (`{ by, host, pid, key?, params? }`), in the words of
 * `guidgate history`: "resolve pid 4242 on host-1, key ops, minAgeMs=60000".
 */
function actorText(actor: unknown): string {
  if (actor === null || actor === undefined) return '(not recorded)';
  if (typeof actor !== 'object' || !('by' in actor)) return pairs(actor);
  const a = actor as { by: unknown; host?: unknown; pid?: unknown; key?: unknown; params?: unknown };
  const params = typeof a.params === 'object' && a.params !== null ? Object.entries(a.params).map(([k, v]) => `${k}=${scalar(v)}`) : [];
  return [`${scalar(a.by)} pid ${scalar(a.pid)} on ${scalar(a.host)}`, ...(a.key === undefined ? [] : [`key ${scalar(a.key)}`]), ...params].join(', ');
}

function fill(dl: HTMLElement, facts: ReadonlyArray<readonly [string, Child]>): void {
  dl.replaceChildren(...facts.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

const body = (table: HTMLTableElement): HTMLTableSectionElement => table.tBodies[0]!;

// ---- overview ----

/** The oldest row of a status: its GUID (a link to its timeline) and when it last changed. */
function oldest(row: Row | null | undefined): Child {
  if (row === null || row === undefined) return 'none';
  return h('span', {}, guidLink(row.guid), ', last change ', time(row.updatedAt));
}

/** The breaker as `GET /v1/stats` shows it: `{ state: off | closed | open, … }`. */
function breakerText(v: unknown): string {
  if (typeof v !== 'object' || v === null || !('state' in v)) return pairs(v);
  const b = v as { state: unknown; failuresInRow?: unknown; failuresToOpen?: unknown; trialAt?: unknown };
  if (b.state === 'off') return 'off (--breaker-failures 0)';
  if (b.state === 'open') {
    const trial = typeof b.trialAt === 'number' ? ` until ${new Date(b.trialAt).toISOString().slice(11, 19)} UTC` : '';
    return `open: new sends get E902 without a call${trial}`;
  }
  const inRow = typeof b.failuresInRow === 'number' ? ` (${counted(b.failuresInRow, 'failed call')} in a row of ${scalar(b.failuresToOpen)} to open)` : '';
  return `${scalar(b.state)}${inRow}`;
}

/** The continuity guard as `GET /v1/stats` shows it (CONTRACT.md §9): `{ state: off | watching | window, … }`. */
function continuityText(v: unknown): string {
  if (typeof v !== 'object' || v === null || !('state' in v)) return 'not reported';
  const c = v as { state: unknown; endsAt?: unknown; breaks?: unknown };
  const seen = typeof c.breaks === 'number' && c.breaks > 0 ? ` (the ledger went back ${counted(c.breaks, 'time')} since start)` : '';
  if (c.state === 'off') return `off (--continuity-window 0)${seen}`;
  if (c.state === 'window') {
    const until = typeof c.endsAt === 'number' ? ` until ${new Date(c.endsAt).toISOString().replace('T', ' ').slice(0, 19)} UTC` : '';
    return `window open${until}: every new GUID is inquired about before its first send${seen}`;
  }
  return `watching${seen}`;
}

function renderStats(s: Stats): void {
  body(ui.counts).replaceChildren(
    ...STATUSES.map((status) => {
      const c = s.statuses[status];
      return h('tr', {}, h('th', { scope: 'row' }, badge(status)), h('td', { class: 'num' }, String(c?.count ?? 0)), h('td', {}, time(c?.oldestUpdatedAt)));
    }),
  );
  fill(ui.facts, [
    ['Oldest UNKNOWN', oldest(s.oldest.UNKNOWN)],
    ['Oldest FAILED', oldest(s.oldest.FAILED)],
    ['At the attempt cap', s.deadLetters === undefined ? '—' : `${counted(s.deadLetters.count, 'FAILED row')} (never sent again on its own: a person decides)`],
    ['Breaker', breakerText(s.breaker)],
    ['Ledger continuity', continuityText(s.continuity)],
    ['Notifications pending', s.notifications === undefined ? '—' : `${s.notifications.pending}${s.notifications.oldestPendingAt === null ? '' : `, the oldest recorded ${time(s.notifications.oldestPendingAt, false).textContent ?? ''}`} (${s.notifications.givenUp} given up)`],
  ]);
  const minutes = Math.round(s.replies.windowSeconds / 60);
  ui.replies.caption!.textContent = `Replies per code, last ${minutes >= 1 ? `${minutes} min` : `${s.replies.windowSeconds} s`}`;
  const codes = Object.entries(s.replies.perCode).sort(([a], [b]) => a.localeCompare(b));
  body(ui.replies).replaceChildren(
    ...(codes.length === 0
      ? [h('tr', {}, h('td', { colspan: '2' }, 'no replies in this window'))]
      : codes.map(([code, n]) => h('tr', {}, h('th', { scope: 'row' }, code), h('td', { class: 'num' }, String(n))))),
  );
}

// ---- the last hour: replies per minute (the relay's counters) and unsettled rows (sampled by this page) ----

const HOUR_MS = 3_600_000;
/** Replies that did not settle the transfer: sent with the outcome unknown, in progress, not sent, ledger down. */
const UNSETTLING = ['E901', 'E903', 'E902', 'E503'];
const UNSETTLED: readonly Status[] = ['RECEIVED', 'SENT', 'UNKNOWN', 'FAILED'];

/**
 * Unsettled rows, one sample per overview load while this page is open (the relay keeps no history of its row
 * counts; auto-refresh makes the samples regular). Kept for an hour, in this page only.
 */
const samples: Array<{ readonly at: number; readonly unsettled: number }> = [];

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag: string, attrs: Record<string, string | number>): SVGElement {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

const CHART = { width: 300, height: 60 };
const sum = (counts: Readonly<Record<string, number>>, only?: readonly string[]) =>
  Object.entries(counts).reduce((n, [code, k]) => (only === undefined || only.includes(code) ? n + k : n), 0);
const clock = (t: number) => new Date(t).toISOString().slice(11, 16);

/** A small chart with its text: the chart is drawn for the eye, the caption says the same for everyone. */
function figure(el: HTMLElement, id: string, chart: SVGElement | null, caption: string): void {
  const captionEl = h('figcaption', { id }, caption);
  if (chart === null) {
    el.replaceChildren(captionEl);
    return;
  }
  chart.setAttribute('role', 'img');
  chart.setAttribute('aria-labelledby', id);
  el.replaceChildren(chart, captionEl);
}

function renderTrend(s: Stats, now: number): void {
  const perMinute = s.replies.perMinute;
  if (perMinute === undefined || perMinute.length === 0) {
    figure(ui.trendReplies, 'trend-replies-text', null, 'Replies per minute: this relay does not give them (an older version).');
  } else {
    const totals = perMinute.map((m) => sum(m));
    const unsettling = perMinute.map((m) => sum(m, UNSETTLING));
    const peak = Math.max(1, ...totals);
    const step = CHART.width / perMinute.length;
    const chart = svg('svg', { viewBox: `0 0 ${CHART.width} ${CHART.height}`, class: 'chart' });
    totals.forEach((n, i) => {
      if (n === 0) return;
      const hAll = (n / peak) * CHART.height;
      chart.append(svg('rect', { class: 'all', x: i * step, y: CHART.height - hAll, width: step * 0.8, height: hAll }));
      const hBad = (unsettling[i]! / peak) * CHART.height;
      if (hBad > 0) chart.append(svg('rect', { class: 'unsettling', x: i * step, y: CHART.height - hBad, width: step * 0.8, height: hBad }));
    });
    const total = totals.reduce((a, b) => a + b, 0);
    const bad = unsettling.reduce((a, b) => a + b, 0);
    figure(
      ui.trendReplies,
      'trend-replies-text',
      chart,
      `Replies per minute, last 60 minutes: ${total} in all, at most ${Math.max(...totals)} in one minute; ` +
        `${bad} of them not settling the transfer (${UNSETTLING.join(', ')}), in red. This relay's replies only.`,
    );
  }

  const shown = samples.filter((p) => p.at > now - HOUR_MS);
  const latest = shown[shown.length - 1];
  if (latest === undefined) {
    figure(ui.trendUnsettled, 'trend-unsettled-text', null, 'Unsettled rows: no sample yet.');
    return;
  }
  // Headroom above the highest sample, so that a steady count is a line inside the chart, not along its edge.
  const top = Math.max(1, ...shown.map((p) => p.unsettled)) * 1.25;
  const x = (t: number) => ((t - (now - HOUR_MS)) / HOUR_MS) * CHART.width;
  const y = (n: number) => CHART.height - (n / top) * CHART.height;
  const chart = svg('svg', { viewBox: `0 0 ${CHART.width} ${CHART.height}`, class: 'chart' });
  chart.append(svg('polyline', { class: 'line', points: shown.map((p) => `${x(p.at).toFixed(1)},${y(p.unsettled).toFixed(1)}`).join(' ') }));
  for (const p of shown) chart.append(svg('circle', { class: 'point', cx: x(p.at).toFixed(1), cy: y(p.unsettled).toFixed(1), r: 1.5 }));
  const first = shown[0]!;
  const since =
    shown.length === 1
      ? 'one sample so far (turn on auto-refresh to follow it)'
      : `${first.unsettled} at ${clock(first.at)} UTC; ${counted(shown.length, 'sample')}, taken by this page at each refresh while it is open`;
  figure(ui.trendUnsettled, 'trend-unsettled-text', chart, `Unsettled rows (${UNSETTLED.join(', ')}): ${latest.unsettled} now, ${since}.`);
}

/** Each overview load is numbered too: an answer that arrives after a later load started is dropped. */
let overviewLoads = 0;
/** The last overview: the attempt cap (deadLetters.maxAttempts) decides whether reprocess is offered. */
let lastStats: Stats | null = null;

async function loadOverview(quiet = false): Promise<boolean> {
  const mine = ++overviewLoads;
  if (!quiet) say(ui.overviewStatus, 'Loading…');
  const r = await getStats();
  if (mine !== overviewLoads) return r.ok;
  if (!r.ok) {
    failed(ui.overviewStatus, r.error);
    return false;
  }
  lastStats = r.value;
  const now = Date.now();
  samples.push({ at: now, unsettled: UNSETTLED.reduce((n, st) => n + (r.value.statuses[st]?.count ?? 0), 0) });
  while (samples.length > 0 && samples[0]!.at <= now - HOUR_MS) samples.shift();
  renderStats(r.value);
  renderTrend(r.value, now);
  const every = ui.autoRefresh.checked ? `; auto-refresh every ${ui.refreshEvery.selectedOptions[0]?.textContent ?? ''}` : '';
  say(ui.overviewStatus, `Updated ${new Date(now).toISOString().slice(11, 19)} UTC${every}.`);
  return true;
}

// ---- auto-refresh: off by default; the overview (and its trend) again every interval while it is on ----

let refreshTimer: ReturnType<typeof setInterval> | undefined;

function scheduleRefresh(): void {
  clearInterval(refreshTimer);
  refreshTimer = undefined;
  if (!ui.autoRefresh.checked || savedSession() === null) return;
  refreshTimer = setInterval(() => void loadOverview(true), Number(ui.refreshEvery.value));
}

function stopRefresh(): void {
  ui.autoRefresh.checked = false;
  scheduleRefresh();
}

// ---- rows ----

let cursor: string | null = null;
let nextCursor: string | null = null;

const chosenStatuses = (): Status[] =>
  STATUSES.filter((s) => (ui.statusChoices.querySelector(`input[value="${s}"]`) as HTMLInputElement | null)?.checked === true);

/** Each load is numbered: an answer that arrives after a later load started is dropped, never shown over it. */
const latest = { rows: 0, transfer: 0 };

async function loadRows(): Promise<void> {
  const mine = ++latest.rows;
  say(ui.rowsStatus, 'Loading…');
  const statuses = chosenStatuses();
  const r = await getLedger({ statuses, olderThan: ui.olderThan.value.trim(), cursor, limit: PAGE_SIZE });
  if (mine !== latest.rows) return;
  if (!r.ok) {
    failed(ui.rowsStatus, r.error);
    if (r.error.field === 'olderThan') ui.olderThan.focus();
    return;
  }
  const { rows } = r.value;
  nextCursor = r.value.nextCursor;
  body(ui.rows).replaceChildren(
    ...rows.map((row: Row) =>
      h(
        'tr',
        {},
        h('th', { scope: 'row', class: 'mono', 'data-label': 'GUID' }, guidLink(row.guid)),
        h('td', { 'data-label': 'Status' }, badge(row.status)),
        h('td', { 'data-label': 'Code' }, codeText(row)),
        h('td', { class: 'num', 'data-label': 'Attempts' }, String(row.attempts)),
        h('td', { 'data-label': 'Last change' }, time(row.updatedAt)),
      ),
    ),
  );
  const which = statuses.length === 0 ? 'any status' : statuses.join(', ');
  say(ui.rowsStatus, `${counted(rows.length, 'row')} (${which}${ui.olderThan.value.trim() === '' ? '' : `, older than ${ui.olderThan.value.trim()}`})${cursor === null ? '' : ', a later page'}${nextCursor === null ? '.' : '; more on the next page.'}`);
  ui.nextPage.disabled = nextCursor === null;
  ui.firstPage.disabled = cursor === null;
}

// ---- reconciliation: the recorded runs (`guidgate reconcile`), newest first; one opened, its breaks by severity ----

/** The categories in the order a summary lists them (CONTRACT.md §8), with their severity. */
const CATEGORY_SEVERITY: ReadonlyArray<readonly [string, string]> = [
  ['duplicate_in_journal', 'P1'],
  ['amount_mismatch', 'P1'],
  ['rejected_in_ledger', 'P1'],
  ['unsettled_in_ledger', 'P1 when FAILED, else P2'],
  ['missing_in_journal', 'P2'],
  ['missing_in_ledger', 'P2'],
  ['pending', 'not a break'],
  ['matched', '—'],
];
/** Breaks asked per page: a run may hold millions, so the console never asks for them all at once. */
const BREAKS_PAGE = 200;

const money = (amount: number | null | undefined, currency: string | null | undefined) => (amount === null || amount === undefined ? '—' : formatMoney(amount, currency));

function breakRow(b: ReconciliationBreak, runId: string): HTMLElement {
  const l = b.ledger;
  const ledger = l === null ? 'no row (never relayed)' : `${l.status}${l.code === null ? '' : ` ${l.code}`}, ${money(l.amount, l.currency)}`;
  const postings = b.journal.map((e) => `${e.ref}: ${money(e.amount, e.currency)}`).join('; ');
  const journal = b.journal.length === 0 ? 'no posting' : `${counted(b.journal.length, 'posting')} (${postings})`;
  const differs = b.differs.length === 0 ? '' : `, differs in ${b.differs.join(', ')}`;
  return h(
    'tr',
    { class: b.severity },
    h('th', { scope: 'row', class: 'mono', 'data-label': 'GUID' }, guidLink(b.guid)),
    h('td', { 'data-label': 'Category' }, `${b.category}${differs}`),
    h('td', { 'data-label': 'Ledger' }, ledger),
    h('td', { 'data-label': 'Journal' }, journal),
    h('td', { 'data-label': 'First seen' }, b.firstSeen === runId ? `run ${b.firstSeen} (this run)` : `run ${b.firstSeen} (still open)`),
  );
}

function renderBreaks(table: HTMLTableElement, severity: 'P1' | 'P2', run: Reconciliation, page: number): void {
  const shown = run.breaks.filter((b) => b.severity === severity);
  const total = run.severities[severity];
  const paged = page > 1 || run.nextAfter !== null;
  table.caption!.textContent = `${severity} breaks: ${total}${paged ? `; page ${page} (${BREAKS_PAGE} breaks a page, in GUID order) shows ${shown.length}` : ''}`;
  body(table).replaceChildren(...(shown.length === 0 ? [h('tr', {}, h('td', { colspan: '5' }, `no ${severity} break`))] : shown.map((b) => breakRow(b, run.id))));
}

function renderReconciliation(run: Reconciliation, page: number): void {
  const utc = (t: Instant) => new Date(t).toISOString();
  fill(ui.reconFacts, [
    ['Run', `${run.id}`],
    ['Recorded', time(run.recordedAt)],
    ['Window', `${utc(run.window.from)} to ${utc(run.window.to)} (to excluded; pending ${Math.round(run.window.pendingMs / 60_000)} min)`],
    ['Journal', h('span', { class: 'mono' }, run.source)],
    ['SHA-256', h('span', { class: 'mono' }, run.sha256)],
    ['Breaks', h('span', {}, `${run.breakCount}: `, badge('P1'), ` ${run.severities.P1}, `, badge('P2'), ` ${run.severities.P2}`)],
  ]);
  body(ui.reconCounts).replaceChildren(
    ...CATEGORY_SEVERITY.map(([category, severity]) => h('tr', {}, h('th', { scope: 'row' }, category), h('td', {}, severity), h('td', { class: 'num' }, String(run.counts[category] ?? 0)))),
  );
  renderBreaks(ui.reconP1, 'P1', run, page);
  renderBreaks(ui.reconP2, 'P2', run, page);
  ui.reconNext.hidden = run.nextAfter === null;
  ui.reconFirst.hidden = page === 1;
  reconPage = { id: run.id, page, nextAfter: run.nextAfter };
}

/** The page of breaks shown: its run, its number, and where the next one starts. */
let reconPage: { id: string; page: number; nextAfter: string | null } | null = null;

/** The next page of the shown run's breaks (or its first again). */
async function loadBreaksPage(which: 'next' | 'first'): Promise<void> {
  const at = reconPage;
  if (at === null || (which === 'next' && at.nextAfter === null)) return;
  const mine = ++reconLoads;
  say(ui.reconStatus, 'Loading…');
  const r = await getReconciliation(at.id, BREAKS_PAGE, which === 'next' ? at.nextAfter : null);
  if (mine !== reconLoads) return;
  if (!r.ok) {
    failed(ui.reconStatus, r.error);
    return;
  }
  const page = which === 'next' ? at.page + 1 : 1;
  renderReconciliation(r.value, page);
  say(ui.reconStatus, `Run ${r.value.id}, page ${page} of its breaks.`);
}

/** Runs listed per page; older ones a click away (the API pages them by run id). */
const RUNS_LISTED = 20;

/** The runs listed so far, newest first; the cursor of the next (older) page; the run opened by a click (null: the latest). */
const runList = { runs: [] as ReconciliationRun[], next: null as string | null, chosen: null as string | null, shown: null as string | null };

let reconLoads = 0;

function renderRuns(): void {
  const utc = (t: Instant) => new Date(t).toISOString().slice(0, 16).replace('T', ' ');
  body(ui.reconRuns).replaceChildren(
    ...runList.runs.map((run) =>
      h(
        'tr',
        run.id === runList.shown ? { 'aria-current': 'true' } : {},
        h('th', { scope: 'row', 'data-label': 'Run' }, openRunButton(run.id)),
        h('td', { 'data-label': 'Recorded' }, time(run.recordedAt)),
        h('td', { 'data-label': 'Window' }, `${utc(run.window.from)} to ${utc(run.window.to)} UTC`),
        h('td', { 'data-label': 'Breaks' }, run.breakCount === 0 ? 'none' : h('span', {}, `${run.breakCount}: `, badge('P1'), ` ${run.severities.P1}, `, badge('P2'), ` ${run.severities.P2}`)),
      ),
    ),
  );
  ui.reconOlder.hidden = runList.next === null;
}

function openRunButton(id: string): HTMLElement {
  const button = h('button', { type: 'button' }, `Run ${id}`);
  button.addEventListener('click', () => {
    // The latest run clicked means "the latest": a refresh then opens a newer one when one was recorded.
    runList.chosen = id === runList.runs[0]?.id ? null : id;
    void openRun(id);
  });
  return button;
}

/** The list's first page again, then the run opened before (if still listed) or the latest. */
async function loadReconciliation(): Promise<void> {
  const mine = ++reconLoads;
  say(ui.reconStatus, 'Loading…');
  const list = await getReconciliations(RUNS_LISTED);
  if (mine !== reconLoads) return;
  if (!list.ok) {
    failed(ui.reconStatus, list.error);
    return;
  }
  runList.runs = [...list.value.runs];
  runList.next = list.value.nextCursor;
  const latestRun = runList.runs[0];
  if (latestRun === undefined) {
    ui.recon.hidden = true;
    ui.reconList.hidden = true;
    say(ui.reconStatus, 'No reconciliation run recorded yet (guidgate reconcile records each run).');
    return;
  }
  if (runList.chosen !== null && !runList.runs.some((r) => r.id === runList.chosen)) runList.chosen = null;
  renderRuns();
  ui.reconList.hidden = false;
  await openRun(runList.chosen ?? latestRun.id, mine);
}

async function loadOlderRuns(): Promise<void> {
  const mine = ++reconLoads;
  const r = await getReconciliations(RUNS_LISTED, runList.next);
  if (mine !== reconLoads) return;
  if (!r.ok) {
    failed(ui.reconStatus, r.error);
    return;
  }
  runList.runs.push(...r.value.runs);
  runList.next = r.value.nextCursor;
  renderRuns();
  say(ui.reconStatus, `${counted(runList.runs.length, 'run')} listed${runList.next === null ? ', all there are' : ''}.`);
}

/** One run with its breaks; `load`: the list's load it belongs to (a click starts a load of its own). */
async function openRun(id: string, load = ++reconLoads): Promise<void> {
  say(ui.reconStatus, `Loading run ${id}…`);
  const r = await getReconciliation(id, BREAKS_PAGE);
  if (load !== reconLoads) return;
  if (!r.ok) {
    failed(ui.reconStatus, r.error);
    return;
  }
  renderReconciliation(r.value, 1);
  ui.recon.hidden = false;
  runList.shown = r.value.id;
  renderRuns();
  const { P1, P2 } = r.value.severities;
  const which = r.value.id === runList.runs[0]?.id ? `The latest run, ${r.value.id}` : `Run ${r.value.id} (not the latest)`;
  say(ui.reconStatus, `${which}: ${P1 + P2 === 0 ? 'no break' : `${P1} P1 and ${counted(P2, 'P2 break')}; each GUID opens its timeline below`}.`, P1 > 0 ? 'error' : 'ok');
}

// ---- one transfer ----

let shownGuid: string | null = null;

/**
 * What a StaleAnswer means, in words (as `guidgate history` says it): an answer the row had moved past, kept, never
 * the row's outcome; for an older attempt, the transfer may have been applied twice.
 */
function staleAnswerNote(e: Extract<TimelineEntry, { kind: 'event' }>): string | null {
  if (e.type !== 'StaleAnswer' || typeof e.data !== 'object' || e.data === null) return null;
  const { attempt, currentAttempt } = e.data as { attempt?: unknown; currentAttempt?: unknown };
  if (typeof attempt !== 'number' || typeof currentAttempt !== 'number') return null;
  return attempt < currentAttempt
    ? `Attempt ${attempt} was answered after attempt ${currentAttempt} was sent: the account system may have applied this transfer twice. Not the row's outcome.`
    : `Attempt ${attempt} was answered after the row was settled another way. Not the row's outcome.`;
}

function entryRow(e: TimelineEntry, i: number): HTMLElement {
  if (e.kind === 'event') {
    const details = e.data === undefined || e.data === null ? '—' : h('pre', {}, JSON.stringify(e.data, null, 2));
    const stale = staleAnswerNote(e);
    return h(
      'tr',
      { class: stale === null ? 'event' : 'event stale' },
      h('td', { class: 'num', 'data-label': '#' }, String(i + 1)),
      h('td', { 'data-label': 'Time (UTC)' }, time(e.at, false)),
      h('th', { scope: 'row', 'data-label': 'What' }, `${e.type} (event, seq ${e.seq})`),
      h('td', { 'data-label': 'Actor' }, actorText(e.actor)),
      h('td', { 'data-label': 'Details' }, stale === null ? details : h('div', {}, h('p', { class: 'warning' }, stale), details)),
    );
  }
  return h(
    'tr',
    { class: 'request' },
    h('td', { class: 'num', 'data-label': '#' }, String(i + 1)),
    h('td', { 'data-label': 'Time (UTC)' }, time(e.at, false)),
    h('th', { scope: 'row', 'data-label': 'What' }, `request answered ${e.code}${e.replayed ? ' (replayed, nothing sent)' : ''}`),
    h('td', { 'data-label': 'Actor' }, e.key === null ? 'channel (no key)' : `channel key ${e.key}`),
    h('td', { 'data-label': 'Details' }, e.fingerprintMatch ? 'same request as the first (fingerprint matched)' : 'a DIFFERENT request under this GUID (fingerprint mismatch)'),
  );
}

/** A notification to channels (CONTRACT.md §11) under the timeline: where it stands, then each delivery attempt. */
function notificationRows(n: NotificationShown): HTMLElement[] {
  const row = (what: string, at: number, details: string) =>
    h('tr', { class: 'notification' }, h('td', { class: 'num', 'data-label': '#' }, ''), h('td', { 'data-label': 'Time (UTC)' }, time(at, false)), h('th', { scope: 'row', 'data-label': 'What' }, what), h('td', { 'data-label': 'Actor' }, 'serve --notify-url'), h('td', { 'data-label': 'Details' }, details));
  return [
    row(`${n.type} notification (${n.state.replace('_', ' ')})`, Date.parse(n.recordedAt), `webhook-id ${n.webhookId}, ${counted(n.tries.length, 'attempt')}`),
    ...n.tries.map((t) => row(`notification attempt: ${t.result.replace('_', ' ')}`, t.at, `${t.httpStatus === null ? '' : `HTTP ${t.httpStatus}, `}${t.detail}`)),
  ];
}

/** The Claimed event's request, as the timeline shows it: its amount in major units, or null when it is not there (purged). */
function amountOf(timeline: readonly TimelineEntry[]): string | null {
  const claimed = timeline.find((e) => e.kind === 'event' && e.type === 'Claimed');
  if (claimed?.kind !== 'event' || typeof claimed.data !== 'object' || claimed.data === null) return null;
  const request = (claimed.data as { request?: unknown }).request;
  if (typeof request !== 'object' || request === null) return null;
  const { amount, currency } = request as { amount?: unknown; currency?: unknown };
  return typeof amount === 'number' ? formatMoney(amount, typeof currency === 'string' ? currency : null) : null;
}

/**
 * Shows a transfer's timeline. `reveal`: it was asked for (a GUID clicked or typed, the page's address), so the
 * section is scrolled into view and takes the focus (it may lie screens below what was clicked); a reload after an
 * action leaves the view where the action's result is.
 */
async function loadTransfer(guid: string, reveal = false): Promise<void> {
  ui.guid.value = guid;
  hidePreview();
  say(ui.actionStatus, '');
  say(ui.transferStatus, `Loading ${guid}…`);
  const mine = ++latest.transfer;
  const r = await getTimeline(guid);
  if (mine !== latest.transfer) return;
  if (!r.ok) {
    ui.transfer.hidden = true;
    shownGuid = null;
    failed(ui.transferStatus, r.error);
    return;
  }
  const { row, timeline } = r.value;
  shownGuid = guid;
  fill(ui.rowFacts, [
    ['GUID', h('span', { class: 'mono' }, guid)],
    ['Status', row === null ? '—' : badge(row.status)],
    ['Code', row === null ? '—' : transferCodeText(row, timeline)],
    ['Amount', amountOf(timeline) ?? '—'],
    ['Attempts', scalar(row?.attempts)],
    ['Created', time(row?.createdAt)],
    ['Last change', time(row?.updatedAt)],
    ['Channel key', scalar(row?.['channel'])],
  ]);
  ui.timeline.caption!.textContent = `Timeline of ${guid}: ${counted(timeline.length, 'entry', 'entries')}, oldest first`;
  body(ui.timeline).replaceChildren(...timeline.map(entryRow), ...(r.value.notifications ?? []).flatMap(notificationRows));
  offerActions(guid, row);
  ui.transfer.hidden = false;
  say(ui.transferStatus, `${guid}: ${row === null ? 'no ledger row' : row.status}, ${counted(timeline.length, 'timeline entry', 'timeline entries')}.`);
  if (reveal) {
    ui.transferTitle.scrollIntoView({ block: 'start' });
    ui.transferTitle.focus({ preventScroll: true });
  }
}

// ---- actions: only those the row's status allows; a dry run first, then the real one on confirmation ----

let pending: { action: Action; guid: string; minAge: string } | null = null;
/** The row of the transfer shown: what the preview says could become of it. */
let shownRow: Row | null = null;

function hidePreview(): void {
  pending = null;
  ui.preview.hidden = true;
}

/**
 * Offers resolve for an UNKNOWN row and reprocess for a FAILED row under the attempt cap, the rows the commands
 * take (anything else would only be refused with E409), and says why for every other row.
 */
function offerActions(guid: string, row: Row | null): void {
  shownRow = row;
  const cap = lastStats?.deadLetters?.maxAttempts;
  const deadLetter = row?.status === 'FAILED' && cap !== undefined && row.attempts >= cap;
  const resolve = row?.status === 'UNKNOWN';
  const reprocess = row?.status === 'FAILED' && !deadLetter;
  ui.previewResolve.hidden = !resolve;
  ui.previewReprocess.hidden = !reprocess;
  ui.action.hidden = !(resolve || reprocess);
  let note: string;
  let command: string | null = null;
  if (row === null) note = 'No ledger row: nothing to act on.';
  else if (resolve) note = 'UNKNOWN: sent, outcome unknown. Resolve asks the account system what became of it.';
  else if (reprocess) {
    note =
      `FAILED after ${counted(row.attempts, 'attempt')}${cap === undefined ? '' : ` of ${cap}`}: ` +
      (row.failedByInquiry === true
        ? 'one of its attempts left, so it may have arrived. Reprocess asks the account system first, and sends it only if the answer is absent.'
        : 'never sent (the connection was refused). Reprocess sends it again, the same GUID and bytes.');
  } else if (deadLetter) {
    note =
      `A dead letter: FAILED at the attempt cap (${cap}); nothing sends it again on its own. The console does not raise the cap: ` +
      'after the checks of the runbook (docs/operating.md, Dead letters), on the relay\'s host (add --dry-run first to see what it would do): ';
    const given = lastStats?.deadLetters?.command;
    command = given === undefined ? `guidgate reprocess --db … --account-url … --max-attempts ${cap + 1} ${guid}` : `${given} ${guid}`;
  } else if (row.status === 'DONE') note = 'DONE: settled. Nothing to resolve or reprocess.';
  else if (row.status === 'PURGED') note = 'PURGED: finished and forgotten. Nothing to resolve or reprocess.';
  else note = `${row.status}: in flight. Nothing to do until it is answered, or swept as an orphan after its call timeout plus --grace (it then becomes UNKNOWN or FAILED).`;
  ui.actionNote.replaceChildren(note, ...(command === null ? [] : [h('code', { id: 'dead-letter-command' }, command)]));
}

const statusOf = (row: Row | null) => (row === null ? 'no row' : `${row.status}${row.code === null ? '' : ` (${row.code})`}`);

/** What the real run could make of the row: a dry run changes nothing, so its "after" is only the "before". */
function couldBecome(action: Action, row: Row | null): string[] {
  if (action === 'resolve') {
    return [
      "processed → DONE, with the account system's answer (the channel's next resend gets it)",
      'absent → FAILED: sent, but the account system has no record of it (reprocess, or the channel, may send it again)',
      'no answer, or none it can use → stays UNKNOWN (E901), asked again later',
    ];
  }
  const sent = [
    'answered → DONE (0000, B2xx or E500: the account system\'s answer)',
    'connection refused → FAILED again, one attempt more',
    'no answer in time → UNKNOWN (E901), for resolve',
  ];
  if (row?.failedByInquiry !== true) return sent;
  return [
    'an inquiry first: processed → DONE, nothing sent',
    'too young for it, or no clear answer → stays FAILED, nothing sent',
    ...sent.map((s) => `absent, then sent: ${s}`),
  ];
}

function resultFacts(r: ActionResult, action: Action): Array<readonly [string, Child]> {
  const facts: Array<readonly [string, Child]> = [
    ['Action', action],
    ['GUID', h('span', { class: 'mono' }, r.guid)],
    ['Outcome', `${scalar(r.outcome)}${r.detail === undefined ? '' : `: ${r.detail}`}`],
    ['Status before', statusOf(r.before)],
  ];
  if (!r.dryRun) return [...facts, ['Status after', statusOf(r.after)]];
  return [...facts, ['Could become', h('ul', {}, ...couldBecome(action, shownRow).map((c) => h('li', {}, c)))]];
}

async function preview(action: Action): Promise<void> {
  if (shownGuid === null) return;
  const guid = shownGuid;
  const minAge = ui.minAge.value.trim();
  hidePreview();
  say(ui.actionStatus, `Previewing ${action} of ${guid} (dry run)…`);
  const r = await runAction(action, guid, { dryRun: true, minAge });
  if (!r.ok) {
    failed(ui.actionStatus, r.error);
    if (r.error.field === 'minAge') ui.minAge.focus();
    return;
  }
  pending = { action, guid, minAge };
  ui.previewTitle.textContent = `Preview of ${action} (dry run: nothing changed yet)`;
  fill(ui.previewFacts, resultFacts(r.value, action));
  ui.confirm.textContent = `Confirm ${action}`;
  ui.preview.hidden = false;
  say(ui.actionStatus, `Dry run of ${action}: outcome ${scalar(r.value.outcome)}, ${statusOf(r.value.before)} now; nothing was asked, sent or changed. Confirm to do it.`);
  ui.preview.focus();
}

async function confirm(): Promise<void> {
  if (pending === null) return;
  const { action, guid, minAge } = pending;
  hidePreview();
  say(ui.actionStatus, `Running ${action} of ${guid}…`);
  const r = await runAction(action, guid, { dryRun: false, minAge });
  if (!r.ok) {
    failed(ui.actionStatus, r.error);
    return;
  }
  const done = `${action} of ${guid}: outcome ${scalar(r.value.outcome)}, ${statusOf(r.value.before)} → ${statusOf(r.value.after)}.`;
  await loadTransfer(guid);
  say(ui.actionStatus, done, 'ok');
  ui.actionStatus.focus();
  void loadOverview();
}

// ---- session ----

/** Signed out (or never signed in): the sign-in form only, nothing shown, nothing called, no timer running. */
function signedOutView(): void {
  forgetSession();
  stopRefresh();
  lastStats = null;
  samples.length = 0;
  for (const t of [ui.counts, ui.replies, ui.rows, ui.timeline, ui.reconRuns, ui.reconCounts, ui.reconP1, ui.reconP2]) body(t).replaceChildren();
  for (const f of [ui.facts, ui.trendReplies, ui.trendUnsettled, ui.reconFacts]) f.replaceChildren();
  ui.recon.hidden = true;
  ui.reconList.hidden = true;
  Object.assign(runList, { runs: [], next: null, chosen: null, shown: null });
  ui.transfer.hidden = true;
  shownGuid = null;
  shownRow = null;
  hidePreview();
  for (const st of [ui.overviewStatus, ui.rowsStatus, ui.transferStatus, ui.actionStatus, ui.reconStatus]) say(st, '');
  ui.main.hidden = true;
  ui.logout.hidden = true;
}

async function start(): Promise<void> {
  const session = savedSession();
  if (session === null) {
    // Nothing is asked before a token (or, for a relay without keys, an empty sign-in) is given.
    signedOutView();
    say(ui.session, 'Enter a token to sign in.');
    ui.token.focus();
    return;
  }
  ui.logout.hidden = false;
  const ok = await loadOverview();
  if (!ok) {
    // A refused token has been said so already (E401); a known key without `read` is told here.
    if (savedSession() !== null) say(ui.session, `Signed in, but this key may not read the ledger: ${ui.overviewStatus.textContent ?? ''}`, 'error');
    ui.token.focus();
    return;
  }
  ui.main.hidden = false;
  cursor = null;
  await loadRows();
  await loadReconciliation();
  // The transfer the address names is opened (its GUID put in the field) before the session says it is ready:
  // said earlier, a GUID typed in the meantime was overwritten by the address's when the rows came in.
  route();
  say(ui.session, session.token !== null ? 'Signed in (the token is kept for this browser tab only).' : 'No token: the relay runs without keys.', 'ok');
}

function route(): void {
  const m = /^#guid=(.+)$/.exec(location.hash);
  if (m === null) return;
  let guid: string;
  try {
    guid = decodeURIComponent(m[1]!);
  } catch {
    say(ui.transferStatus, 'The address names no valid GUID.', 'error');
    return;
  }
  void loadTransfer(guid, true);
}

function wire(): void {
  ui.statusChoices.replaceChildren(
    ...STATUSES.map((s) => h('label', {}, h('input', { type: 'checkbox', name: 'status', value: s }), ` ${s}`)),
  );
  ui.actionStatus.tabIndex = -1;
  ui.transferTitle.tabIndex = -1;

  ui.login.addEventListener('submit', (ev) => {
    ev.preventDefault();
    saveSession(ui.token.value.trim());
    ui.token.value = '';
    void start();
  });
  ui.logout.addEventListener('click', () => {
    signedOutView();
    say(ui.session, 'Signed out: the token is forgotten.');
    ui.token.focus();
  });
  ui.refresh.addEventListener('click', () => void loadOverview());
  ui.reconRefresh.addEventListener('click', () => void loadReconciliation());
  ui.reconNext.addEventListener('click', () => void loadBreaksPage('next'));
  ui.reconFirst.addEventListener('click', () => void loadBreaksPage('first'));
  ui.reconOlder.addEventListener('click', () => void loadOlderRuns());
  ui.autoRefresh.addEventListener('change', () => {
    scheduleRefresh();
    if (ui.autoRefresh.checked) void loadOverview(true);
  });
  ui.refreshEvery.addEventListener('change', () => {
    scheduleRefresh();
    if (ui.autoRefresh.checked) void loadOverview(true);
  });
  ui.filter.addEventListener('submit', (ev) => {
    ev.preventDefault();
    cursor = null;
    void loadRows();
  });
  ui.nextPage.addEventListener('click', () => {
    cursor = nextCursor;
    void loadRows();
  });
  ui.firstPage.addEventListener('click', () => {
    cursor = null;
    void loadRows();
  });
  ui.find.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const guid = ui.guid.value.trim();
    if (guid === '') {
      say(ui.transferStatus, 'Enter a GUID.', 'error');
      ui.guid.focus();
      return;
    }
    const hash = `#guid=${encodeURIComponent(guid)}`;
    if (location.hash === hash) void loadTransfer(guid, true);
    else location.hash = hash;
  });
  window.addEventListener('hashchange', route);
  ui.action.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const kind = ev.submitter instanceof HTMLButtonElement ? ev.submitter.value : '';
    if (kind === 'resolve' || kind === 'reprocess') void preview(kind);
  });
  ui.confirm.addEventListener('click', () => void confirm());
  ui.cancel.addEventListener('click', () => {
    hidePreview();
    say(ui.actionStatus, 'Cancelled: nothing was changed.');
  });
}

wire();
void start();
