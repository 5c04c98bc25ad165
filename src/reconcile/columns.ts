import { ReconcileUsageError } from './errors.js';

/** The columns of a CSV journal (CONTRACT.md §8), by their contract names. */
export const JOURNAL_COLUMNS = ['guid', 'ref', 'from', 'to', 'amount', 'currency', 'applied_at'] as const;
export type JournalColumn = (typeof JOURNAL_COLUMNS)[number];

/** The header name each column has in the file: the contract name unless `--columns` maps it. */
export type ColumnNames = Readonly<Record<JournalColumn, string>>;

export const CONTRACT_COLUMN_NAMES: ColumnNames = Object.fromEntries(JOURNAL_COLUMNS.map((c) => [c, c])) as Record<JournalColumn, string>;

const isJournalColumn = (s: string): s is JournalColumn => (JOURNAL_COLUMNS as readonly string[]).includes(s);

/**
 * `--columns guid=TXN_NO,amount=AMT,…` → the header name of every column (the contract name for those not
 * mapped). Names are compared exactly (after trimming spaces around them). A ReconcileUsageError names what is
 * wrong: an unknown column, a pair without `=`, an empty name, a column mapped twice, two columns on one name.
 */
export function parseColumns(text: string | undefined): ColumnNames {
  const names: Record<JournalColumn, string> = { ...CONTRACT_COLUMN_NAMES };
  if (text === undefined) return names;
  const bad = (detail: string): never => {
    throw new ReconcileUsageError('--columns', detail);
  };
  const mapped = new Set<JournalColumn>();
  const pairs = text.split(',');
  if (text.trim() === '') bad(`is empty: give column=HEADER pairs, e.g. guid=TXN_NO,amount=AMT (columns: ${JOURNAL_COLUMNS.join(', ')})`);
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq < 0) bad(`"${pair.trim()}" is not column=HEADER`);
    const column = pair.slice(0, eq).trim();
    const header = pair.slice(eq + 1).trim();
    if (!isJournalColumn(column)) bad(`"${column}" is not a journal column (${JOURNAL_COLUMNS.join(', ')})`);
    const c = column as JournalColumn;
    if (header === '') bad(`${c} has an empty header name`);
    if (mapped.has(c)) bad(`${c} is mapped twice`);
    mapped.add(c);
    names[c] = header;
  }
  const byHeader = new Map<string, JournalColumn>();
  for (const c of JOURNAL_COLUMNS) {
    const other = byHeader.get(names[c]);
    if (other !== undefined) bad(`${other} and ${c} would both read the column "${names[c]}"`);
    byHeader.set(names[c], c);
  }
  return names;
}

/** How a field is named in an error: the file's header, and the contract's name when they differ. */
export function columnLabel(names: ColumnNames, column: JournalColumn): string {
  return names[column] === column ? column : `${names[column]} (${column})`;
}
