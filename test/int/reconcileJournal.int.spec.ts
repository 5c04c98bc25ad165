import { createHash } from 'node:crypto';
import { readdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseColumns } from '../../src/reconcile/columns.js';
import { csvEntries } from '../../src/reconcile/csvJournal.js';
import { JournalLineError, JournalSourceError } from '../../src/reconcile/errors.js';
import { openJournalFile, openJournalUrl, type JournalInput } from '../../src/reconcile/journalInput.js';
import { ndjsonEntries } from '../../src/reconcile/ndjsonJournal.js';
import { reconcile, type JournalEntry } from '../../src/reconcile/index.js';
import { checkedUtf8 } from '../../src/reconcile/utf8Lines.js';
import { csvText, memoryLedger, ndjsonText } from '../support/reconcile.js';
import { useTempDir } from '../support/tmp.js';
import { useCleanup } from '../support/cleanup.js';

const tempDir = useTempDir();
const T = Date.UTC(2024, 4, 1, 2);

async function entriesOf(input: JournalInput, columns?: string): Promise<JournalEntry[]> {
  const all: JournalEntry[] = [];
  const bytes = checkedUtf8(input.bytes);
  const batches = input.format === 'csv' ? csvEntries(bytes, parseColumns(columns)) : ndjsonEntries(bytes);
  for await (const batch of batches) all.push(...batch);
  return all;
}

async function readFile(name: string, text: string | Buffer, columns?: string): Promise<JournalEntry[]> {
  const path = join(tempDir(), name);
  writeFileSync(path, text);
  return entriesOf(await openJournalFile(path), columns);
}

/** The error a whole run stops with, after checking it wrote no break and left no temporary file. */
async function runError(name: string, text: string | Buffer, columns?: string): Promise<Error> {
  const dir = tempDir();
  const path = join(dir, name);
  writeFileSync(path, text);
  const breaks: unknown[] = [];
  const stage = join(dir, 'stage');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(stage);
  const run = reconcile({
    window: { from: 0, to: 2 * T, pendingMs: 0 },
    journal: await openJournalFile(path),
    ledger: memoryLedger([]),
    onBreak: (b) => void breaks.push(b),
    tempDir: stage,
    ...(columns === undefined ? {} : { columns: parseColumns(columns) }),
  });
  const err = await run.then(
    () => new Error('the run finished'),
    (e: unknown) => e as Error,
  );
  expect(breaks).toEqual([]);
  expect(readdirSync(stage)).toEqual([]);
  return err;
}

function expectLineError(err: Error, line: number, field: string | null, detail: RegExp): void {
  expect(err).toBeInstanceOf(JournalLineError);
  const e = err as JournalLineError;
  expect({ line: e.line, field: e.field }).toEqual({ line, field });
  expect(e.detail).toMatch(detail);
  expect(e.message).toContain(`journal line ${line}`);
}

const good = (guid: string, over: string = '') => `{"guid":"${guid}","ref":"r-${guid}","from":"A-1","to":"B-2","amount":100,"currency":"CNY","appliedAt":${T}${over}}`;

describe('NDJSON journal', () => {
  it('reads every field exactly, amounts past 2^53 included; a missing currency is null; blank lines and CRLF are fine', async () => {
    const text = `${good('G-1')}\r\n\n{"guid":"G-2","ref":"r2","from":"A","to":"B","amount":123456789012345678901234567890,"appliedAt":5,"extra":{"amount":1}}\n   \n{"guid":"G-3","ref":"r3","from":"A","to":"B","amount":-7,"currency":null,"appliedAt":6}`;
    const entries = await readFile('j.ndjson', text);
    expect(entries).toEqual([
      { guid: 'G-1', ref: 'r-G-1', from: 'A-1', to: 'B-2', amount: 100n, currency: 'CNY', appliedAt: T, line: 1 },
      { guid: 'G-2', ref: 'r2', from: 'A', to: 'B', amount: 123456789012345678901234567890n, currency: null, appliedAt: 5, line: 3 },
      { guid: 'G-3', ref: 'r3', from: 'A', to: 'B', amount: -7n, currency: null, appliedAt: 6, line: 5 },
    ]);
  });

  it('.jsonl is NDJSON too; a BOM at the start is passed over; lines split across reads are whole', async () => {
    const many = Array.from({ length: 5000 }, (_, i) => good(`G-${i}`)).join('\n');
    const entries = await readFile('j.jsonl', `\ufeff${many}\n`);
    expect(entries).toHaveLength(5000);
    expect(entries[4999]).toMatchObject({ guid: 'G-4999', line: 5000 });
  });

  it.each([
    ['not JSON', `${good('G-1')}\n{"guid":`, 2, null, /is not valid JSON/],
    ['not an object', `${good('G-1')}\n[1,2]`, 2, null, /is not a JSON object/],
    ['guid missing', '{"ref":"r","from":"A","to":"B","amount":1,"appliedAt":1}', 1, 'guid', /is missing/],
    ['guid empty', '{"guid":"","ref":"r","from":"A","to":"B","amount":1,"appliedAt":1}', 1, 'guid', /is empty/],
    ['guid a number', '{"guid":7,"ref":"r","from":"A","to":"B","amount":1,"appliedAt":1}', 1, 'guid', /must be a string/],
    ['control character', '{"guid":"G\\u001b[31m","ref":"r","from":"A","to":"B","amount":1,"appliedAt":1}', 1, 'guid', /control characters/],
    ['lone surrogate', '{"guid":"G\\ud800","ref":"r","from":"A","to":"B","amount":1,"appliedAt":1}', 1, 'guid', /lone surrogate/],
    ['ref missing', '{"guid":"G","from":"A","to":"B","amount":1,"appliedAt":1}', 1, 'ref', /is missing/],
    ['from missing', '{"guid":"G","ref":"r","to":"B","amount":1,"appliedAt":1}', 1, 'from', /is missing/],
    ['to null', '{"guid":"G","ref":"r","from":"A","to":null,"amount":1,"appliedAt":1}', 1, 'to', /must be a string/],
    ['amount missing', '{"guid":"G","ref":"r","from":"A","to":"B","appliedAt":1}', 1, 'amount', /is missing/],
    ['amount with a fraction', '{"guid":"G","ref":"r","from":"A","to":"B","amount":1.5,"appliedAt":1}', 1, 'amount', /not an integer/],
    ['amount 1.0', '{"guid":"G","ref":"r","from":"A","to":"B","amount":1.0,"appliedAt":1}', 1, 'amount', /"1.0" is not an integer/],
    ['amount 1e2', '{"guid":"G","ref":"r","from":"A","to":"B","amount":1e2,"appliedAt":1}', 1, 'amount', /not an integer/],
    ['amount 0.99999999999999999 (JSON.parse says 1)', '{"guid":"G","ref":"r","from":"A","to":"B","amount":0.99999999999999999,"appliedAt":1}', 1, 'amount', /not an integer/],
    ['amount a string', '{"guid":"G","ref":"r","from":"A","to":"B","amount":"100","appliedAt":1}', 1, 'amount', /a JSON number/],
    ['amount twice', '{"guid":"G","ref":"r","from":"A","to":"B","amount":1,"amount":2,"appliedAt":1}', 1, 'amount', /more than once/],
    ['currency a number', '{"guid":"G","ref":"r","from":"A","to":"B","amount":1,"currency":156,"appliedAt":1}', 1, 'currency', /must be a string/],
    ['appliedAt missing', '{"guid":"G","ref":"r","from":"A","to":"B","amount":1}', 1, 'appliedAt', /is missing/],
    ['appliedAt ISO', '{"guid":"G","ref":"r","from":"A","to":"B","amount":1,"appliedAt":"2024-05-01T00:00:00Z"}', 1, 'appliedAt', /ms since the epoch/],
    ['appliedAt negative', '{"guid":"G","ref":"r","from":"A","to":"B","amount":1,"appliedAt":-1}', 1, 'appliedAt', /ms since the epoch/],
    ['appliedAt with a fraction', '{"guid":"G","ref":"r","from":"A","to":"B","amount":1,"appliedAt":1.5}', 1, 'appliedAt', /ms since the epoch/],
  ])('%s: the run stops naming the line and the field', async (_what, text, line, field, detail) => {
    expectLineError(await runError('bad.ndjson', `${text}\n${good('G-after')}\n`), line, field, detail);
  });

  it('invalid UTF-8 names its line, also when the bad byte is past the first read', async () => {
    const lines = Array.from({ length: 3000 }, (_, i) => good(`G-${i}`));
    const bad = Buffer.concat([Buffer.from(`${lines.join('\n')}\n{"guid":"G-x","ref":"`), Buffer.from([0xc3, 0x28]), Buffer.from('","from":"A","to":"B","amount":1,"appliedAt":1}\n')]);
    expectLineError(await runError('utf8.ndjson', bad), 3001, null, /not valid UTF-8/);
  });

  it('a character cut off by the end of the file is invalid UTF-8 on the last line', async () => {
    expectLineError(await runError('cut.ndjson', Buffer.concat([Buffer.from(`${good('G-1')}\n${good('G-2')}\n`), Buffer.from([0xe4, 0xb8])])), 3, null, /ends inside a character/);
  });

  it('a line longer than 1 MiB is refused rather than buffered', async () => {
    expectLineError(await runError('long.ndjson', `${good('G-1')}\n${'x'.repeat(1024 * 1024 + 10)}\n`), 2, null, /longer than 1048576 bytes/);
  });
});

describe('CSV journal', () => {
  it('reads the contract columns in any order, RFC 4180 quoting, ISO times with offsets, an empty currency as null', async () => {
    const text =
      'applied_at,ref,"guid",amount,currency,from,to,memo\r\n' +
      '2024-05-01T10:00:00+08:00,"r,1",G-1,100,CNY,A-1,B-2,"said ""hi"""\r\n' +
      '\r\n' +
      `${T},r2,G-2,99999999999999999999,,A,B,"a memo\non two lines"\r\n` +
      '2024-05-01T02:00:00.250Z,r3,G-3,5,USD,A,B,x\r\n';
    expect(await readFile('j.csv', text)).toEqual([
      { guid: 'G-1', ref: 'r,1', from: 'A-1', to: 'B-2', amount: 100n, currency: 'CNY', appliedAt: T, line: 2 },
      { guid: 'G-2', ref: 'r2', from: 'A', to: 'B', amount: 99999999999999999999n, currency: null, appliedAt: T, line: 4 },
      { guid: 'G-3', ref: 'r3', from: 'A', to: 'B', amount: 5n, currency: 'USD', appliedAt: T + 250, line: 6 },
    ]);
  });

  it('--columns maps a core\'s own header names (with a BOM before the header)', async () => {
    const text = '\ufeffTXN_NO,AMT,POSTED,CCY,REF,DR,CR\nG-1,250,1714528800000,CNY,r1,A-1,B-2\n';
    expect(await readFile('core.csv', text, 'guid=TXN_NO,amount=AMT,applied_at=POSTED,currency=CCY,ref=REF,from=DR,to=CR')).toEqual([
      { guid: 'G-1', ref: 'r1', from: 'A-1', to: 'B-2', amount: 250n, currency: 'CNY', appliedAt: 1714528800000, line: 2 },
    ]);
  });

  const header = 'guid,ref,from,to,amount,currency,applied_at';
  const row = (over: Partial<Record<'guid' | 'amount' | 'applied_at', string>> = {}) => `${over.guid ?? 'G-1'},r,A,B,${over.amount ?? '100'},CNY,${over.applied_at ?? String(T)}`;
  it.each([
    ['a column missing from the header', 'guid,ref,from,to,amount,applied_at\nG,r,A,B,1,5\n', undefined, 1, 'currency', /no such column in the header/],
    ['a mapped column missing', `${header}\n${row()}\n`, 'guid=TXN_NO', 1, 'TXN_NO (guid)', /no such column/],
    ['a column twice in the header', `${header},guid\n${row()},G\n`, undefined, 1, 'guid', /appears twice/],
    ['fewer values than the header', `${header}\n${row()}\nG-2,r,A,B,100\n`, undefined, 3, 'currency', /5 values where the header has 7/],
    ['more values than the header', `${header}\n${row()},extra\n`, undefined, 2, null, /8 values where the header has 7/],
    ['amount not an integer', `${header}\n${row()}\n${row({ amount: '12.50' })}\n`, undefined, 3, 'amount', /"12.50" is not an integer/],
    ['amount with spaces', `${header}\n${row({ amount: ' 12' })}\n`, undefined, 2, 'amount', /not an integer/],
    ['a mapped amount not an integer', 'TXN_NO,ref,from,to,AMT,currency,applied_at\nG,r,A,B,1e3,CNY,5\n', 'guid=TXN_NO,amount=AMT', 2, 'AMT (amount)', /not an integer/],
    ['amount empty', `${header}\n${row({ amount: '' })}\n`, undefined, 2, 'amount', /not an integer/],
    ['a time without an offset', `${header}\n${row({ applied_at: '2024-05-01 10:00:00' })}\n`, undefined, 2, 'applied_at', /has no offset: add an offset.*never the host's local time/],
    ['a date alone', `${header}\n${row({ applied_at: '2024-05-01' })}\n`, undefined, 2, 'applied_at', /date without a time/],
    ['a bad time', `${header}\n${row({ applied_at: 'noon' })}\n`, undefined, 2, 'applied_at', /neither ms/],
    ['an empty time', `${header}\n${row({ applied_at: '' })}\n`, undefined, 2, 'applied_at', /is empty/],
    ['an empty guid', `${header}\n${row({ guid: '' })}\n`, undefined, 2, 'guid', /is empty/],
    ['a line break inside a guid', `${header}\n${row()}\n"G\n2",r,A,B,1,CNY,5\n`, undefined, 3, 'guid', /control characters/],
    ['a quote inside an unquoted value', `${header}\nG-1,r"x,A,B,1,CNY,5\n`, undefined, 2, 'ref', /a quote inside an unquoted value/],
    ['characters after a closing quote', `${header}\nG-1,"r"x,A,B,1,CNY,5\n`, undefined, 2, 'ref', /after a closing quote/],
    ['a quote never closed', `${header}\n${row()}\nG-1,"r,A,B,1,CNY,5\n`, undefined, 3, 'ref', /not closed/],
    ['no header at all', '', undefined, 1, null, /no header line/],
  ])('%s: the run stops naming the line and the field', async (_what, text, columns, line, field, detail) => {
    expectLineError(await runError('bad.csv', text, columns), line, field, detail);
  });

  it('invalid UTF-8 names its line', async () => {
    const bad = Buffer.concat([Buffer.from(`${header}\n${row()}\n${row()}\nG-3,r,`), Buffer.from([0xff]), Buffer.from(`,B,1,CNY,5\n`)]);
    expectLineError(await runError('utf8.csv', bad), 4, null, /not valid UTF-8/);
  });

  it('an overlong encoding and an encoded surrogate are not UTF-8 either', async () => {
    for (const bytes of [[0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80]]) {
      const bad = Buffer.concat([Buffer.from(`${header}\nG-1,r`), Buffer.from(bytes), Buffer.from(',A,B,1,CNY,5\n')]);
      expectLineError(await runError('utf8.csv', bad), 2, null, /not valid UTF-8/);
    }
  });
});

describe('journal files', () => {
  it('an unknown extension, a missing file and a folder are source errors', async () => {
    const dir = tempDir();
    await expect(openJournalFile(join(dir, 'j.txt'))).rejects.toThrow(/cannot tell the format of .*j\.txt: name it \.csv, \.ndjson or \.jsonl/);
    await expect(openJournalFile(join(dir, 'none.csv'))).rejects.toThrow(/no journal at .*none\.csv/);
    const folder = join(dir, 'x.ndjson');
    (await import('node:fs')).mkdirSync(folder);
    await expect(openJournalFile(folder)).rejects.toThrow(JournalSourceError);
  });

  it('the run\'s SHA-256 is that of the file\'s bytes, and the entries are the same read from CSV or NDJSON', async () => {
    const dir = tempDir();
    // Enough lines for several reads of the file (256 KiB each): the hash must cover every one.
    const entries = Array.from({ length: 12000 }, (_, i) => ({ guid: `G-${i}`, appliedAt: T + (i % 10), amount: i + 1, currency: i % 3 === 0 ? null : 'CNY' }));
    const results = [];
    for (const [name, text] of [['j.ndjson', ndjsonText(entries)], ['j.csv', csvText(entries)]] as const) {
      const path = join(dir, name);
      writeFileSync(path, text);
      const summary = await reconcile({ window: { from: T, to: T + 10, pendingMs: 0 }, journal: await openJournalFile(path), ledger: memoryLedger([]), onBreak: () => {}, tempDir: dir });
      expect(summary.sha256).toBe(createHash('sha256').update(text).digest('hex'));
      expect(summary.bytes).toBe(Buffer.byteLength(text));
      expect(summary.bytes).toBeGreaterThan(2 * 256 * 1024);
      results.push({ counts: summary.counts, money: summary.money });
    }
    expect(results[0]).toEqual(results[1]);
  });
});

describe('HTTP journal (GET {base}/journal)', () => {
  const cleanup = useCleanup();
  /** Stops the last server `serve` started, before the test ends (a source that went away). */
  let closeLastServer: () => Promise<void> = async () => undefined;
  /** A journal server on loopback, closed after the test. */
  async function serve(handler: (url: URL, res: ServerResponse) => void): Promise<string> {
    const server: Server = createServer((req, res) => handler(new URL(req.url ?? '/', 'http://x'), res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closeLastServer = cleanup.add(() => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    });
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  const range = { from: T, to: T + 10 };

  it('asks for the range and reads a 200 application/x-ndjson answer (parameters allowed)', async () => {
    let asked: URL | null = null;
    const base = await serve((url, res) => {
      asked = url;
      res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8' }).end(`${good('G-1')}\n`);
    });
    const input = await openJournalUrl(`${base}/core/`, range);
    expect(asked!.pathname).toBe('/core/journal');
    expect(Object.fromEntries(asked!.searchParams)).toEqual({ from: String(T), to: String(T + 10) });
    expect(input.source).toBe(`${base}/core/journal?from=${T}&to=${T + 10}`);
    expect(await entriesOf(input)).toHaveLength(1);
  });

  it('an empty 200 NDJSON answer is an empty journal: 0 breaks only when the journal really answered', async () => {
    const base = await serve((_url, res) => res.writeHead(200, { 'content-type': 'application/x-ndjson' }).end());
    const summary = await reconcile({ window: { ...range, pendingMs: 0 }, journal: await openJournalUrl(base, range), ledger: memoryLedger([]), onBreak: () => {}, tempDir: tempDir() });
    expect(summary.breaks).toBe(0);
    expect(summary.journal.read).toBe(0);
  });

  it.each([
    ['HTTP 500', 500, { 'content-type': 'application/json' }, '{"code":"E500"}', /answered HTTP 500: \{"code":"E500"\}/],
    ['HTTP 404 (a wrong base URL)', 404, { 'content-type': 'text/html' }, '<h1>Not found</h1>', /answered HTTP 404/],
    ['HTTP 204', 204, {}, '', /answered HTTP 204/],
    ['200 as JSON', 200, { 'content-type': 'application/json' }, '[]', /Content-Type application\/json, not application\/x-ndjson/],
    ['200 as HTML', 200, { 'content-type': 'text/html' }, '<html></html>', /Content-Type text\/html/],
    ['200 without a type', 200, {}, good('G-1'), /without a Content-Type/],
  ])('%s is an error of the journal, never an empty journal', async (_what, status, headers, body, message) => {
    const base = await serve((_url, res) => res.writeHead(status, headers).end(body));
    const err = await openJournalUrl(base, range).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JournalSourceError);
    expect((err as Error).message).toMatch(message);
  });

  it('a body that breaks off is an error of the journal, not a shorter journal', async () => {
    const base = await serve((_url, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write(`${good('G-1')}\n${good('G-2')}\n`);
      setImmediate(() => res.socket?.destroy());
    });
    const run = reconcile({ window: { ...range, pendingMs: 0 }, journal: await openJournalUrl(base, range), ledger: memoryLedger([]), onBreak: () => {}, tempDir: tempDir() });
    await expect(run).rejects.toThrow(JournalSourceError);
    await expect(run).rejects.toThrow(/could not be read to its end/);
  });

  it('a journal nobody answers is an error; credentials in the URL never reach a message or the source', async () => {
    const base = await serve((_url, res) => res.writeHead(503, { 'content-type': 'text/plain' }).end('down'));
    const withSecret = base.replace('http://', 'http://auditor:s3cret@');
    const err = (await openJournalUrl(withSecret, range).catch((e: unknown) => e)) as Error;
    expect(err.message).toMatch(/answered HTTP 503: down/);
    expect(err.message).not.toContain('s3cret');
    const closed = await serve(() => {});
    await closeLastServer();
    const refused = (await openJournalUrl(closed.replace('http://', 'http://a:s3cret@'), range).catch((e: unknown) => e)) as Error;
    expect(refused).toBeInstanceOf(JournalSourceError);
    expect(refused.message).toMatch(/did not answer/);
    expect(refused.message).not.toContain('s3cret');
  });
});
