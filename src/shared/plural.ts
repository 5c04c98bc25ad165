/** A count with its noun, singular for exactly one: `counted(1, 'row')` → `1 row`, `counted(2, 'entry', 'entries')` → `2 entries`. */
export function counted(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
