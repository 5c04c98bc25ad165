import { DEFAULTS } from '../shared/defaults.js';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname } from 'node:path';
import { request, type Dispatcher } from 'undici';
import { JournalSourceError } from './errors.js';

export type JournalFormat = 'ndjson' | 'csv';

/** A journal's bytes, not yet read, and what they are. */
export interface JournalInput {
  /** The file's path or the URL asked (credentials removed): what the run records as its source. */
  readonly source: string;
  readonly format: JournalFormat;
  /** The bytes, to be read once; a failure to read throws a JournalSourceError. */
  readonly bytes: AsyncIterable<Uint8Array>;
  /** How many bytes there are when known (a file's size, a Content-Length), for progress. */
  readonly size: number | null;
  /** Lets go of the file or the connection when the run stops before reading to the end. */
  close(): Promise<void>;
}

/** `.csv` → csv; `.ndjson` or `.jsonl` → ndjson; anything else is not a journal we can tell. */
export function journalFormatOf(path: string): JournalFormat | null {
  const ext = extname(path).toLowerCase();
  if (ext === '.csv') return 'csv';
  if (ext === '.ndjson' || ext === '.jsonl') return 'ndjson';
  return null;
}

/** The journal formats `--format` names. */
export const JOURNAL_FORMATS: readonly JournalFormat[] = ['csv', 'ndjson'];

/** `--format`'s value (any case) as a journal format; null for anything else. */
export function parseJournalFormat(text: string): JournalFormat | null {
  const f = text.trim().toLowerCase();
  return (JOURNAL_FORMATS as readonly string[]).includes(f) ? (f as JournalFormat) : null;
}

async function* wrapped(bytes: AsyncIterable<Uint8Array>, what: string): AsyncGenerator<Uint8Array> {
  let read = 0;
  try {
    for await (const chunk of bytes) {
      read += chunk.byteLength;
      yield chunk;
    }
  } catch (err) {
    throw new JournalSourceError(`${what} could not be read to its end (after ${read} bytes): ${(err as Error).message}`, { cause: err });
  }
}

/** The body's bytes; once the deadline has passed, its own error (not the abort's) ends the read. */
async function* withinDeadline(bytes: AsyncIterable<Uint8Array>, signal: AbortSignal, done: () => void): AsyncGenerator<Uint8Array> {
  try {
    for await (const chunk of bytes) yield chunk;
  } catch (err) {
    if (signal.aborted && signal.reason instanceof JournalSourceError) throw signal.reason;
    throw err;
  } finally {
    done();
  }
}

/** A journal file (`--journal FILE`); its format from the name unless given. */
export async function openJournalFile(path: string, format?: JournalFormat): Promise<JournalInput> {
  const fmt = format ?? journalFormatOf(path);
  if (fmt === null) throw new JournalSourceError(`cannot tell the format of ${path}: name it .csv, .ndjson or .jsonl, or say it with --format csv|ndjson`);
  let size: number;
  try {
    const s = await stat(path);
    if (!s.isFile()) throw new JournalSourceError(`${path} is not a file`);
    size = s.size;
  } catch (err) {
    if (err instanceof JournalSourceError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw new JournalSourceError(code === 'ENOENT' ? `no journal at ${path}` : `cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
  const stream = createReadStream(path, { highWaterMark: 256 * 1024 });
  return {
    source: path,
    format: fmt,
    bytes: wrapped(stream, `the journal ${path}`),
    size,
    close: async () => {
      stream.destroy();
    },
  };
}

/** The URL without user name and password, for messages and the run's record. */
function shownUrl(url: URL): string {
  const shown = new URL(url.href);
  shown.username = '';
  shown.password = '';
  return shown.href;
}

export interface JournalUrlOptions {
  /** An undici dispatcher (an `https://` account system with its own CA); undici's global one otherwise. */
  readonly dispatcher?: Dispatcher;
  /** Longest wait for the headers and between two pieces of the body (default 60 s). */
  readonly timeoutMs?: number;
  /**
   * Longest time for the whole journal, from the request to the body's last byte (default 15 min): a journal that
   * trickles (a byte now and then, each within timeoutMs) fails the run then, rather than running forever.
   */
  readonly deadlineMs?: number;
}

/** `--journal-timeout`'s default: the whole journal over HTTP within 15 minutes. */
export const JOURNAL_DEADLINE_MS = DEFAULTS.reconcileJournalTimeoutMs;

/** Lets go of a body not read to its end (undici reports that as an 'error' event, which nobody needs). */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => {});
  body.destroy();
}

/** The first bytes of a refused answer, as one line of printable text (for the error only). */
async function excerpt(body: Dispatcher.ResponseData['body']): Promise<string> {
  let text = '';
  try {
    for await (const chunk of body) {
      text += Buffer.from(chunk as Uint8Array).toString('utf8');
      if (text.length >= 200) break;
    }
  } catch {
    // the excerpt is only a hint
  } finally {
    discard(body);
  }
  const shown = text.slice(0, 200).replace(/[^\x20-\x7e]+/g, ' ').trim();
  return shown === '' ? '' : `: ${shown}`;
}

/**
 * The account system's journal over HTTP: `GET {base}/journal?from=&to=` (CONTRACT.md §8). Only a 200 with
 * `Content-Type: application/x-ndjson` is a journal: any other answer, or none, is a JournalSourceError, never an
 * empty journal. Resolves once the headers are in; the body is read by the run.
 */
export async function openJournalUrl(baseUrl: string, range: { readonly from: number; readonly to: number }, opts: JournalUrlOptions = {}): Promise<JournalInput> {
  let url: URL;
  try {
    url = new URL(`${baseUrl.replace(/\/+$/, '')}/journal`);
  } catch {
    throw new JournalSourceError('the account URL is not a URL');
  }
  url.searchParams.set('from', String(range.from));
  url.searchParams.set('to', String(range.to));
  const source = shownUrl(url);
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const deadlineMs = opts.deadlineMs ?? JOURNAL_DEADLINE_MS;
  // One deadline for the whole read: the request and every byte of the body (undici's own limits are per wait).
  const deadline = new AbortController();
  const overdue = `the journal at ${source} was not read in full within ${deadlineMs} ms (--journal-timeout)`;
  const timer = setTimeout(() => deadline.abort(new JournalSourceError(overdue)), deadlineMs);
  const done = (): void => clearTimeout(timer);
  let res: Dispatcher.ResponseData;
  try {
    res = await request(url, {
      method: 'GET',
      headers: { accept: 'application/x-ndjson' },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: deadline.signal,
      ...(opts.dispatcher === undefined ? {} : { dispatcher: opts.dispatcher }),
    });
  } catch (err) {
    done();
    if (deadline.signal.aborted) throw new JournalSourceError(overdue, { cause: err });
    throw new JournalSourceError(`the journal at ${source} did not answer: ${(err as Error).message}`, { cause: err });
  }
  if (res.statusCode !== 200) {
    done();
    throw new JournalSourceError(`the journal at ${source} answered HTTP ${res.statusCode}${await excerpt(res.body)}`);
  }
  const type = res.headers['content-type'];
  const mediaType = (Array.isArray(type) ? type[0] : type)?.split(';', 1)[0]?.trim().toLowerCase();
  if (mediaType !== 'application/x-ndjson') {
    done();
    discard(res.body);
    throw new JournalSourceError(`the journal at ${source} answered ${mediaType === undefined ? 'without a Content-Type' : `Content-Type ${mediaType}`}, not application/x-ndjson`);
  }
  const length = Number(res.headers['content-length']);
  return {
    source,
    format: 'ndjson',
    bytes: withinDeadline(wrapped(res.body, `the journal at ${source}`), deadline.signal, done),
    size: Number.isSafeInteger(length) ? length : null,
    close: async () => {
      done();
      discard(res.body);
    },
  };
}
