/**
 * Money as people read it (CONTRACT.md §5): an amount in minor units shown in major units by the currency's ISO 4217
 * minor units (1500 CNY → `15.00 CNY`, 1500 JPY → `1500 JPY`). No currency, or one ISO 4217 does not list here: two
 * decimals and the code as given. Machine output (`--json`, `--csv`, the API) keeps the integers in minor units.
 */

/** ISO 4217 currencies whose minor unit is not 2 (every other code: 2). */
const MINOR_UNITS: Readonly<Record<string, number>> = {
  BIF: 0, CLP: 0, DJF: 0, GNF: 0, ISK: 0, JPY: 0, KMF: 0, KRW: 0, PYG: 0, RWF: 0, UGX: 0, UYI: 0, VND: 0, VUV: 0, XAF: 0, XOF: 0, XPF: 0,
  BHD: 3, IQD: 3, JOD: 3, KWD: 3, LYD: 3, OMR: 3, TND: 3,
  CLF: 4, UYW: 4,
};

/** How many decimals `currency`'s minor unit has (2 when none or unknown). */
export function minorUnits(currency: string | null | undefined): number {
  return (currency === null || currency === undefined ? undefined : MINOR_UNITS[currency]) ?? 2;
}

/**
 * The amount (an integer in minor units, safe or bigint: sums may pass 2^53) in major units, digits only (`15.00`,
 * `-0.05`, `1500`). Exact: no floating point.
 */
export function majorUnits(minor: number | bigint, currency: string | null | undefined): string {
  const units = minorUnits(currency);
  const value = typeof minor === 'bigint' ? minor : BigInt(minor);
  const negative = value < 0n;
  const digits = (negative ? -value : value).toString();
  if (units === 0) return `${negative ? '-' : ''}${digits}`;
  const padded = digits.padStart(units + 1, '0');
  return `${negative ? '-' : ''}${padded.slice(0, -units)}.${padded.slice(-units)}`;
}

/** `15.00 CNY`; without a currency `15.00`. */
export function formatMoney(minor: number | bigint, currency: string | null | undefined): string {
  const major = majorUnits(minor, currency);
  return currency === null || currency === undefined || currency === '' ? major : `${major} ${currency}`;
}
