import { Readable } from 'node:stream';
import { CsvError, parse, type Info } from 'csv-parse';
import { columnLabel, JOURNAL_COLUMNS, type ColumnNames, type JournalColumn } from './columns.js';
import { JournalLineError, isReconcileError } from './errors.js';
import { integerAmount, MAX_LINE_BYTES, optionalText, requiredText } from './journalFields.js';
import { parseInstant } from './instant.js';
import type { JournalEntry } from './types.js';

const BATCH = 1000;

/** Where each journal column sits in a record, from the header line. */
function columnIndexes(header: readonly string[], line: number, names: ColumnNames): Record<JournalColumn, number> {
  const at = {} as Record<JournalColumn, number>;
  const trimmed = header.map((h) => h.trim());
  for (const c of JOURNAL_COLUMNS) {
    const i = trimmed.indexOf(names[c]);
    if (i < 0) throw new JournalLineError(line, columnLabel(names, c), `no such column in the header (it has: ${trimmed.join(', ')})`);
    if (trimmed.indexOf(names[c], i + 1) >= 0) throw new JournalLineError(line, columnLabel(names, c), 'appears twice in the header');
    at[c] = i;
  }
  return at;
}

function entryFromRecord(
  record: readonly string[],
  line: number,
  header: readonly string[],
  at: Record<JournalColumn, number>,
  names: ColumnNames,
): JournalEntry {
  if (record.length !== header.length) {
    const missing = header[record.length];
    throw new JournalLineError(
      line,
      record.length < header.length ? `${missing}` : null,
      `${record.length} values where the header has ${header.length}` + (record.length < header.length ? ' (this column has no value)' : ''),
    );
  }
  const cell = (c: JournalColumn): string => record[at[c]]!;
  const label = (c: JournalColumn): string => columnLabel(names, c);
  const appliedAtText = cell('applied_at');
  const appliedAt = parseInstant(appliedAtText);
  if (!appliedAt.ok) throw new JournalLineError(line, label('applied_at'), appliedAtText === '' ? 'is empty' : appliedAt.reason);
  return {
    guid: requiredText(cell('guid'), label('guid'), line),
    ref: requiredText(cell('ref'), label('ref'), line),
    from: requiredText(cell('from'), label('from'), line),
    to: requiredText(cell('to'), label('to'), line),
    amount: integerAmount(cell('amount'), label('amount'), line),
    currency: optionalText(cell('currency'), label('currency'), line),
    appliedAt: appliedAt.ms,
    line,
  };
}

/** csv-parse's failures in our words, naming the line and (when it knows it) the column. */
function fromCsvError(err: CsvError, header: readonly string[] | null): JournalLineError {
  const ctx = err as CsvError & { lines?: number; index?: number };
  const line = typeof ctx.lines === 'number' ? ctx.lines : 0;
  const field = header !== null && typeof ctx.index === 'number' ? (header[ctx.index] ?? null) : null;
  switch (err.code) {
    case 'CSV_QUOTE_NOT_CLOSED':
      return new JournalLineError(line, field, 'a quoted value is not closed before the end of the journal');
    case 'CSV_INVALID_CLOSING_QUOTE':
    case 'CSV_NON_TRIMABLE_CHAR_AFTER_CLOSING_QUOTE':
      return new JournalLineError(line, field, 'characters after a closing quote (a quote inside a quoted value is written "")');
    case 'INVALID_OPENING_QUOTE':
      return new JournalLineError(line, field, 'a quote inside an unquoted value (quote the whole value, a quote inside it written "")');
    case 'CSV_MAX_RECORD_SIZE':
      return new JournalLineError(line, field, `a record longer than ${MAX_LINE_BYTES} bytes`);
    default:
      return new JournalLineError(line, field, err.message);
  }
}

/** The first line of a record: csv-parse counts the line where it ends, and a quoted value may hold newlines. */
function firstLineOf(record: readonly string[], info: Info): number {
  let newlines = 0;
  for (const value of record) for (let i = value.indexOf('\n'); i !== -1; i = value.indexOf('\n', i + 1)) newlines++;
  return info.lines - newlines;
}

/**
 * The entries of a CSV journal (bytes already known to be UTF-8, RFC 4180 quoting, a header line, the columns
 * in any order, other columns ignored), in batches. Blank lines hold no posting and are passed over; every other
 * bad line throws a JournalLineError naming it and the column.
 */
export async function* csvEntries(bytes: AsyncIterable<Uint8Array>, names: ColumnNames): AsyncGenerator<JournalEntry[]> {
  // The header as parsed, for naming the column of a quoting error: such an error can come from the same chunk as
  // the header line, before this loop has read the header record.
  let parsedHeader: string[] | null = null;
  const parser = parse({
    bom: true, info: true, skip_empty_lines: true, relax_column_count: true, max_record_size: MAX_LINE_BYTES,
    // With `info`, a record reaches this hook already wrapped with its info.
    on_record: (record: string[]) => {
      parsedHeader ??= (record as unknown as { record: string[] }).record;
      return record;
    },
  });
  const input = Readable.from(bytes, { objectMode: false });
  // A read error of the input (a broken HTTP body) must reach this loop, not be lost between the two streams.
  input.on('error', (err) => parser.destroy(err));
  input.pipe(parser);
  let header: string[] | null = null;
  let at: Record<JournalColumn, number> | null = null;
  let batch: JournalEntry[] = [];
  try {
    for await (const { record, info } of parser as AsyncIterable<{ record: string[]; info: Info }>) {
      if (header === null || at === null) {
        header = record;
        at = columnIndexes(record, firstLineOf(record, info), names);
        continue;
      }
      batch.push(entryFromRecord(record, firstLineOf(record, info), header, at, names));
      if (batch.length >= BATCH) {
        yield batch;
        batch = [];
      }
    }
  } catch (err) {
    if (isReconcileError(err)) throw err;
    if (err instanceof CsvError) throw fromCsvError(err, parsedHeader);
    throw err;
  } finally {
    input.destroy();
    parser.destroy();
  }
  if (header === null) throw new JournalLineError(1, null, 'the journal has no header line');
  if (batch.length > 0) yield batch;
}
