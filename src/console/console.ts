/**
 * The console page. Everything from the relay is put on the page as text (textContent, attributes set one by
 * one): account answers and a channel's extra fields are data, never markup. The page's CSP forbids inline
 * script besides.
 */
import {
  STATUSES, forgetToken, getLedger, getStats, getTimeline, runAction, saveToken, savedToken,
  type Action, type ActionResult, type ApiError, type Instant, type Row, type Stats, type Status, type TimelineEntry,
} from './api.js';

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
  refresh: byId('refresh', HTMLButtonElement),
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
  transferStatus: byId('transfer-status', HTMLElement),
  transfer: byId('transfer', HTMLElement),
  rowFacts: byId('row-facts', HTMLElement),
  timeline: byId('timeline', HTMLTableElement),
  action: byId('action', HTMLFormElement),
  minAge: byId('min-age', HTMLInputElement),
  preview: byId('preview', HTMLElement),
  previewTitle: byId('preview-title', HTMLElement),
  previewFacts: byId('preview-facts', HTMLElement),
  confirm: byId('confirm', HTMLButtonElement),
  cancel: byId('cancel', HTMLButtonElement),
  actionStatus: byId('action-status', HTMLElement),
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
    forgetToken();
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
  return `${scalar(b.state)}${b.failuresInRow === undefined ? '' : ` (${scalar(b.failuresInRow)} failed calls in a row of ${scalar(b.failuresToOpen)} to open)`}`;
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
    ['At the attempt cap', s.deadLetters === undefined ? '—' : `${s.deadLetters.count} FAILED row${s.deadLetters.count === 1 ? '' : 's'} (reprocess sends them no more)`],
    ['Breaker', breakerText(s.breaker)],
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

async function loadOverview(): Promise<boolean> {
  say(ui.overviewStatus, 'Loading…');
  const r = await getStats();
  if (!r.ok) {
    failed(ui.overviewStatus, r.error);
    return false;
  }
  renderStats(r.value);
  say(ui.overviewStatus, `Updated ${new Date().toISOString().slice(11, 19)} UTC.`);
  return true;
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
      h('tr', {}, h('th', { scope: 'row', class: 'mono' }, guidLink(row.guid)), h('td', {}, badge(row.status)), h('td', {}, scalar(row.code)), h('td', { class: 'num' }, String(row.attempts)), h('td', {}, time(row.updatedAt))),
    ),
  );
  const which = statuses.length === 0 ? 'any status' : statuses.join(', ');
  say(ui.rowsStatus, `${rows.length} row${rows.length === 1 ? '' : 's'} (${which}${ui.olderThan.value.trim() === '' ? '' : `, older than ${ui.olderThan.value.trim()}`})${cursor === null ? '' : ', a later page'}${nextCursor === null ? '.' : '; more on the next page.'}`);
  ui.nextPage.disabled = nextCursor === null;
  ui.firstPage.disabled = cursor === null;
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
      h('td', { class: 'num' }, String(i + 1)),
      h('td', {}, time(e.at, false)),
      h('th', { scope: 'row' }, `${e.type} (event, seq ${e.seq})`),
      h('td', {}, actorText(e.actor)),
      h('td', {}, stale === null ? details : h('div', {}, h('p', { class: 'warning' }, stale), details)),
    );
  }
  return h(
    'tr',
    { class: 'request' },
    h('td', { class: 'num' }, String(i + 1)),
    h('td', {}, time(e.at, false)),
    h('th', { scope: 'row' }, `request answered ${e.code}`),
    h('td', {}, e.key === null ? 'channel (no key)' : `channel key ${e.key}`),
    h('td', {}, e.fingerprintMatch ? 'same request as the first (fingerprint matched)' : 'a DIFFERENT request under this GUID (fingerprint mismatch)'),
  );
}

async function loadTransfer(guid: string): Promise<void> {
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
    ['Code', scalar(row?.code)],
    ['Attempts', scalar(row?.attempts)],
    ['Created', time(row?.createdAt)],
    ['Last change', time(row?.updatedAt)],
    ['Channel key', scalar(row?.['channel'])],
  ]);
  ui.timeline.caption!.textContent = `Timeline of ${guid}: ${timeline.length} entries, oldest first`;
  body(ui.timeline).replaceChildren(...timeline.map(entryRow));
  ui.transfer.hidden = false;
  say(ui.transferStatus, `${guid}: ${row === null ? 'no ledger row' : row.status}, ${timeline.length} timeline entries.`);
}

// ---- actions: a dry run first, then the real one on confirmation ----

let pending: { action: Action; guid: string; minAge: string } | null = null;

function hidePreview(): void {
  pending = null;
  ui.preview.hidden = true;
}

const statusOf = (row: Row | null) => (row === null ? 'no row' : `${row.status}${row.code === null ? '' : ` (${row.code})`}`);

function resultFacts(r: ActionResult, action: Action): Array<readonly [string, Child]> {
  return [
    ['Action', action],
    ['GUID', h('span', { class: 'mono' }, r.guid)],
    ['Outcome', `${scalar(r.outcome)}${r.detail === undefined ? '' : `: ${r.detail}`}`],
    ['Status before', statusOf(r.before)],
    ['Status after', statusOf(r.after)],
  ];
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
  say(ui.actionStatus, `Dry run of ${action}: outcome ${scalar(r.value.outcome)}, ${statusOf(r.value.before)} → ${statusOf(r.value.after)}. Confirm to do it.`);
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

async function start(): Promise<void> {
  const signedIn = savedToken() !== null;
  const ok = await loadOverview();
  if (!ok) {
    // A refused token has been said so already (E401); a known key without `read` is told here.
    if (!signedIn) say(ui.session, 'Enter a token to sign in.');
    else if (savedToken() !== null) say(ui.session, `Signed in, but this key may not read the ledger: ${ui.overviewStatus.textContent ?? ''}`, 'error');
    ui.token.focus();
    return;
  }
  cursor = null;
  await loadRows();
  // The transfer the address names is opened (its GUID put in the field) before the session says it is ready:
  // said earlier, a GUID typed in the meantime was overwritten by the address's when the rows came in.
  route();
  say(ui.session, signedIn ? 'Signed in (the token is kept for this browser tab only).' : 'No token: the relay runs without keys.', 'ok');
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
  void loadTransfer(guid);
}

function wire(): void {
  ui.statusChoices.replaceChildren(
    ...STATUSES.map((s) => h('label', {}, h('input', { type: 'checkbox', name: 'status', value: s }), ` ${s}`)),
  );
  ui.actionStatus.tabIndex = -1;

  ui.login.addEventListener('submit', (ev) => {
    ev.preventDefault();
    saveToken(ui.token.value.trim());
    ui.token.value = '';
    void start();
  });
  ui.logout.addEventListener('click', () => {
    forgetToken();
    for (const t of [ui.counts, ui.replies, ui.rows, ui.timeline]) body(t).replaceChildren();
    ui.facts.replaceChildren();
    ui.transfer.hidden = true;
    shownGuid = null;
    for (const s of [ui.overviewStatus, ui.rowsStatus, ui.transferStatus, ui.actionStatus]) say(s, '');
    say(ui.session, 'Signed out: the token is forgotten.');
    ui.token.focus();
  });
  ui.refresh.addEventListener('click', () => void loadOverview());
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
    if (location.hash === hash) void loadTransfer(guid);
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
