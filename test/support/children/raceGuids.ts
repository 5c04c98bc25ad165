/** The claim races' shared list of GUIDs, `race-0` … `race-(count-1)`, in an order of the seed's own (LCG + Fisher–Yates). */
export function raceGuids(count: number, seedArg: number): string[] {
  let seed = seedArg >>> 0;
  const rand = () => ((seed = (seed * 1664525 + 1013904223) >>> 0) / 2 ** 32);
  const guids = Array.from({ length: count }, (_, i) => `race-${i}`);
  for (let i = guids.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [guids[i], guids[j]] = [guids[j]!, guids[i]!];
  }
  return guids;
}
