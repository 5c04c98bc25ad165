import { describe, expect, it } from 'vitest';
import { formatMoney, majorUnits, minorUnits } from '../../src/shared/money.js';

describe('money for people: major units by ISO 4217', () => {
  it.each([
    [1500, 'CNY', '15.00 CNY'],
    [7199, 'CNY', '71.99 CNY'],
    [5, 'USD', '0.05 USD'],
    [0, 'EUR', '0.00 EUR'],
    [1500, 'JPY', '1500 JPY'],
    [1500, 'KRW', '1500 KRW'],
    [1500, 'KWD', '1.500 KWD'],
    [12345, 'CLF', '1.2345 CLF'],
    [1500, null, '15.00'],
    [1500, 'XYZ', '15.00 XYZ'],
    [-250, 'CNY', '-2.50 CNY'],
    [9007199254740991, 'CNY', '90071992547409.91 CNY'],
  ] as const)('%s %s → %s', (minor, currency, shown) => {
    expect(formatMoney(minor, currency)).toBe(shown);
  });

  it('sums past 2^53 stay exact as bigint', () => {
    expect(majorUnits(9007199254740993n, 'USD')).toBe('90071992547409.93');
  });

  it('the minor units of a currency ISO 4217 does not list here, or of none, are 2', () => {
    expect(minorUnits(undefined)).toBe(2);
    expect(minorUnits('CNY')).toBe(2);
    expect(minorUnits('JPY')).toBe(0);
  });
});
