/**
 * The write batch's array parameters in PostgreSQL's binary format (src/store/postgres/binaryArrays.ts), read back by
 * a real server: each element as sent, NULLs where they were, and an element of the wrong kind refused before
 * anything is sent.
 */
import { describe, expect, it } from 'vitest';
import { binaryArray } from '../../src/store/postgres/binaryArrays.js';
import { admin, postgresForTests } from '../support/pg.js';

const { available } = await postgresForTests();

describe.skipIf(!available)('binary array parameters (real PostgreSQL)', () => {
  it('text, integer and bigint arrays come back as sent: quotes, backslashes, braces, commas, non-ASCII, NULLs, the empty array', async () => {
    const texts = ['{"guid":"G-1","note":"a \\"quoted\\" \\\\ back, {brace}"}', '', 'NULL', '中文 ☃ é', null, ' spaced ', 'x'.repeat(5000)];
    const ints = [0, -1, 2147483647, -2147483648, null, 42];
    const bigs = [0, 1733450000000, -9007199254740991, 9007199254740991, null, '9223372036854775807', '-9223372036854775808'];
    const { rows } = await admin((c) =>
      c.query<{ t: (string | null)[]; i: (number | null)[]; b: (string | null)[]; e: string[]; n: number; tn: number }>({
        text: 'SELECT $1::text[] AS t, $2::integer[] AS i, $3::bigint[]::text[] AS b, $4::text[] AS e, cardinality($4::text[]) AS n, cardinality($1::text[]) AS tn',
        values: [binaryArray('text', texts), binaryArray('integer', ints), binaryArray('bigint', bigs), binaryArray('text', [])],
      }),
    );
    expect(rows[0]!.t).toEqual(texts);
    expect(rows[0]!.i).toEqual(ints);
    expect(rows[0]!.b).toEqual(bigs.map((b) => (b === null ? null : String(b))));
    expect(rows[0]!.e).toEqual([]);
    expect(rows[0]!.n).toBe(0);
    expect(rows[0]!.tn).toBe(texts.length);
  });

  it('in unnest with ordinality, as the write statement reads them: elements paired by position', async () => {
    const { rows } = await admin((c) =>
      c.query<{ guid: string; seq: number; n: string }>({
        text: 'SELECT guid, seq, n::text AS n FROM unnest($1::text[], $2::integer[]) WITH ORDINALITY AS e(guid, seq, n) ORDER BY n',
        values: [binaryArray('text', ['A', 'B', 'C']), binaryArray('integer', [0, 1, 2])],
      }),
    );
    expect(rows).toEqual([{ guid: 'A', seq: 0, n: '1' }, { guid: 'B', seq: 1, n: '2' }, { guid: 'C', seq: 2, n: '3' }]);
  });

  it('an element of another type is refused here, naming its index; the server refuses an array of another element type', async () => {
    expect(() => binaryArray('text', ['a', 1])).toThrow('array element 1 is not text');
    expect(() => binaryArray('integer', [1, 1.5])).toThrow('array element 1 is not a 32-bit integer');
    expect(() => binaryArray('integer', [2 ** 31])).toThrow('array element 0 is not a 32-bit integer');
    expect(() => binaryArray('bigint', ['12a'])).toThrow('array element 0 is not a 64-bit integer');
    expect(() => binaryArray('bigint', ['9223372036854775808'])).toThrow('array element 0 is not a 64-bit integer');
    expect(() => binaryArray('bigint', [2 ** 60])).toThrow('array element 0 is not a 64-bit integer');
    await expect(admin((c) => c.query({ text: 'SELECT $1::bigint[]', values: [binaryArray('text', ['1'])] }))).rejects.toThrow(/array element type 25 \(text\) instead of expected 20 \(bigint\)/);
  });
});
