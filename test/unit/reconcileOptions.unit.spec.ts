import { describe, expect, it } from 'vitest';
import { parseColumns, CONTRACT_COLUMN_NAMES } from '../../src/reconcile/columns.js';
import { ReconcileUsageError, LedgerSourceError } from '../../src/reconcile/errors.js';
import { DEFAULT_PENDING_MS, journalRange, parseInstant, parseWindow } from '../../src/reconcile/instant.js';
import { compareGuids } from '../../src/reconcile/journalStage.js';
import { termsOfRequest } from '../../src/reconcile/ledgerFacts.js';
import { journalFormatOf, parseJournalFormat } from '../../src/reconcile/journalInput.js';

const MAY_1_SHANGHAI = Date.UTC(2024, 3, 30, 16); // 2024-05-01T00:00:00+08:00

function usage(f: () => unknown): ReconcileUsageError {
  try {
    f();
  } catch (err) {
    if (err instanceof ReconcileUsageError) return err;
    throw err;
  }
  throw new Error('expected a ReconcileUsageError');
}

describe('parseInstant: ms or ISO 8601 with an offset, never the host time zone', () => {
  it.each([
    ['1714492800000', 1714492800000],
    ['2024-05-01T00:00:00+08:00', MAY_1_SHANGHAI],
    ['2024-05-01T00:00:00+0800', MAY_1_SHANGHAI],
    ['2024-05-01T00:00+08', MAY_1_SHANGHAI],
    ['2024-04-30T16:00:00Z', MAY_1_SHANGHAI],
    ['2024-04-30 16:00:00z', MAY_1_SHANGHAI],
    ['2024-04-30T11:00:00-05:00', MAY_1_SHANGHAI],
    ['2024-04-30T16:00:00.123Z', MAY_1_SHANGHAI + 123],
    ['2024-04-30T16:00:00.1239Z', MAY_1_SHANGHAI + 123],
    ['2024-04-30T16:00:00,5Z', MAY_1_SHANGHAI + 500],
    ['2024-02-29T00:00:00Z', Date.UTC(2024, 1, 29)],
  ])('%s → %d', (text, ms) => {
    expect(parseInstant(text)).toEqual({ ok: true, ms });
  });

  it('the same instant whatever the host time zone says (TZ is not read)', () => {
    const before = process.env['TZ'];
    try {
      for (const tz of ['Asia/Shanghai', 'America/New_York', 'UTC']) {
        process.env['TZ'] = tz;
        expect(parseInstant('2024-05-01T00:00:00+08:00')).toEqual({ ok: true, ms: MAY_1_SHANGHAI });
      }
    } finally {
      if (before === undefined) delete process.env['TZ'];
      else process.env['TZ'] = before;
    }
  });

  it.each([
    ['2024-05-01', /date without a time.*add an offset.*never the host's local time by accident/],
    ['2024-05-01T00:00:00', /has no offset: add an offset/],
    ['2024-05-01T00:00', /has no offset/],
    ['2024-13-01T00:00:00Z', /not a valid date/],
    ['2023-02-29T00:00:00Z', /not a valid date/],
    ['2024-05-01T24:00:00Z', /not a valid date/],
    ['2024-05-01T00:00:00+24:00', /offset out of range/],
    ['1969-12-31T23:59:59Z', /before 1970/],
    ['yesterday', /neither ms since the epoch nor ISO 8601/],
    ['-5', /neither/],
    ['1.5', /neither/],
    ['99999999999999999999', /past the largest time/],
  ])('%s is refused', (text, reason) => {
    const parsed = parseInstant(text);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.reason).toMatch(reason);
  });
});

describe('parseWindow: --from, --to, --pending', () => {
  it('reads the window and the pending slack', () => {
    expect(parseWindow({ from: '2024-05-01T00:00:00+08:00', to: '2024-05-02T00:00:00+08:00', pending: '30m' })).toEqual({
      from: MAY_1_SHANGHAI, to: MAY_1_SHANGHAI + 86_400_000, pendingMs: 1_800_000,
    });
  });
  it('pending defaults to 1h and may be 0', () => {
    expect(parseWindow({ from: '0', to: '10' }).pendingMs).toBe(DEFAULT_PENDING_MS);
    expect(parseWindow({ from: '0', to: '10', pending: '0' }).pendingMs).toBe(0);
  });
  it.each([
    [{ from: undefined, to: '10' }, '--from', /is required/],
    [{ from: '0', to: '' }, '--to', /is required/],
    [{ from: '2024-05-01', to: '2024-05-02T00:00:00Z' }, '--from', /add an offset/],
    [{ from: '10', to: '10' }, '--to', /must be after --from/],
    [{ from: '0', to: '10', pending: '1 hour' }, '--pending', /not a duration/],
    [{ from: '0', to: '10', pending: '-1h' }, '--pending', /not a duration/],
  ])('%j → a usage error naming %s', (opts, option, detail) => {
    const err = usage(() => parseWindow(opts));
    expect(err.option).toBe(option);
    expect(err.message).toMatch(detail);
  });
  it('the journal is read from from − pending to to + pending (never before the epoch)', () => {
    expect(journalRange({ from: 10_000, to: 20_000, pendingMs: 1000 })).toEqual({ from: 9000, to: 21_000 });
    expect(journalRange({ from: 10, to: 20, pendingMs: 1000 })).toEqual({ from: 0, to: 1020 });
  });
});

describe('parseColumns: --columns guid=TXN_NO,amount=AMT', () => {
  it('maps the named columns and keeps the contract name of the others', () => {
    expect(parseColumns(' guid = TXN_NO ,amount=AMT,applied_at=Posted At')).toEqual({
      ...CONTRACT_COLUMN_NAMES, guid: 'TXN_NO', amount: 'AMT', applied_at: 'Posted At',
    });
    expect(parseColumns(undefined)).toEqual(CONTRACT_COLUMN_NAMES);
  });
  it.each([
    ['', /is empty/],
    ['guid', /"guid" is not column=HEADER/],
    ['txn=TXN_NO', /"txn" is not a journal column \(guid, ref, from, to, amount, currency, applied_at\)/],
    ['guid=', /guid has an empty header name/],
    ['guid=A,guid=B', /guid is mapped twice/],
    ['guid=ID,ref=ID', /guid and ref would both read the column "ID"/],
    ['ref=guid', /guid and ref would both read the column "guid"/],
  ])('%j is refused: %s', (text, detail) => {
    const err = usage(() => parseColumns(text));
    expect(err.option).toBe('--columns');
    expect(err.message).toMatch(detail);
  });
});

describe('termsOfRequest: the stored request, exactly', () => {
  it('reads from, to, amount and currency; no currency is null', () => {
    expect(termsOfRequest('G', '{"guid":"G","from":"A","to":"B","amount":9007199254740991,"currency":"CNY","x":{"amount":1}}')).toEqual({
      from: 'A', to: 'B', amount: 9007199254740991n, currency: 'CNY',
    });
    expect(termsOfRequest('G', '{"from":"A","to":"B","amount":5}').currency).toBeNull();
  });
  it('an amount past 2^53 is read from its digits, not rounded', () => {
    expect(termsOfRequest('G', '{"from":"A","to":"B","amount":9007199254740993}').amount).toBe(9007199254740993n);
  });
  it.each(['not json', '[1]', '{"from":"A","amount":5}', '{"from":"A","to":"B","amount":"5"}', '{"from":"A","to":"B","amount":1.5}', '{"from":"A","to":"B","amount":5,"currency":7}'])(
    '%s: a ledger changed behind guidgate is an error naming the GUID',
    (text) => {
      expect(() => termsOfRequest('G-7', text)).toThrow(LedgerSourceError);
      expect(() => termsOfRequest('G-7', text)).toThrow(/G-7/);
    },
  );
});

describe('compareGuids: code point order (SQLite BINARY over UTF-8)', () => {
  it('orders as the UTF-8 bytes do, also where UTF-16 units would not', () => {
    const guids = ['b', 'a', 'A', 'a-1', '\uffff', '😀', '\ue000', 'é', 'a'];
    const byBytes = [...guids].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    expect([...guids].sort(compareGuids)).toEqual(byBytes);
    expect(compareGuids('😀', '\uffff')).toBeGreaterThan(0); // '😀' < '\uffff' in UTF-16 units
  });
});

describe('the journal file\'s format: --format, else the name', () => {
  it.each([
    ['csv', 'csv'],
    ['NDJSON', 'ndjson'],
    [' ndjson ', 'ndjson'],
    ['jsonl', null],
    ['xml', null],
    ['', null],
  ] as const)('--format %j → %s', (text, format) => {
    expect(parseJournalFormat(text)).toBe(format);
  });
  it.each([
    ['core.csv', 'csv'],
    ['core.NDJSON', 'ndjson'],
    ['core.jsonl', 'ndjson'],
    ['core.txt', null],
    ['core', null],
  ] as const)('%s → %s by its name', (path, format) => {
    expect(journalFormatOf(path)).toBe(format);
  });
});
