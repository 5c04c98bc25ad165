/**
 * JSON text of a plain value whose numbers may be BigInts, written as their digits: JSON numbers have no size
 * limit, and an amount past 2^53 must reach the reader exactly (JSON.stringify refuses BigInts).
 */
export function toJson(value: unknown): string {
  if (typeof value === 'bigint') return value.toString();
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(toJson).join(',')}]`;
  const members: string[] = [];
  for (const [k, v] of Object.entries(value)) if (v !== undefined) members.push(`${JSON.stringify(k)}:${toJson(v)}`);
  return `{${members.join(',')}}`;
}
