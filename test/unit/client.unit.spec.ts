import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { backoffDelay, retryAfterMs } from '../../src/client/backoff.js';
import { InvalidRequestError, RESEND_RULES, resendRuleFor } from '../../src/client/index.js';
import { serialiseTransfer } from '../../src/client/transferBody.js';
import { REPO_ROOT } from '../support/children.js';
import { sectionOf, tableRows } from '../support/markdown.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('serialiseTransfer: one body, checked by the relay\'s decoder', () => {
  it('puts the given GUID first and keeps every other field', () => {
    const { guid, body } = serialiseTransfer({ from: 'A-1', to: 'B-2', amount: 5, guid: 'TX-1', memo: { n: 1 } });
    expect(guid).toBe('TX-1');
    expect(body.toString()).toBe('{"guid":"TX-1","from":"A-1","to":"B-2","amount":5,"memo":{"n":1}}');
  });

  it('makes a random UUID when no GUID is given', () => {
    const a = serialiseTransfer({ from: 'A', to: 'B', amount: 1 });
    const b = serialiseTransfer({ from: 'A', to: 'B', amount: 1 });
    expect(a.guid).toMatch(UUID);
    expect(a.guid).not.toBe(b.guid);
    expect(JSON.parse(a.body.toString()).guid).toBe(a.guid);
  });

  it.each([
    [{ guid: 'TX-1', from: 'A', to: 'B', amount: 0 }, 'amount'],
    [{ guid: 'TX-1', from: 'A', to: 'B', amount: 1.5 }, 'amount'],
    [{ guid: 'TX-1', from: 'A', to: 'A', amount: 1 }, 'to'],
    [{ guid: '-bad', from: 'A', to: 'B', amount: 1 }, 'guid'],
    [{ guid: 'TX-1', from: 'A', to: 'B', amount: 1, currency: 'cny' }, 'currency'],
  ])('refuses %j naming %s, before anything is sent', (input, field) => {
    const thrown = (() => {
      try {
        serialiseTransfer(input);
        return null;
      } catch (e) {
        return e;
      }
    })();
    expect(thrown).toBeInstanceOf(InvalidRequestError);
    expect(thrown).toMatchObject({ code: 'E400', field });
  });
});

describe('resendRuleFor', () => {
  it('takes a definite code only with HTTP 200', () => {
    for (const code of ['0000', 'B201', 'B299', 'E500']) {
      expect(resendRuleFor(200, code).action).toBe('return');
      expect(resendRuleFor(502, code)).toEqual({ action: 'resend', maybeSent: true });
    }
  });
  it('resends, as maybe sent, what the contract does not name', () => {
    for (const code of [undefined, 'E999', 'B100', 'constructor', 'toString']) expect(resendRuleFor(504, code)).toEqual({ action: 'resend', maybeSent: true });
  });
});

describe('backoffDelay', () => {
  it('waits between half and all of min(max, initial·2^n)', () => {
    const opts = { initialMs: 100, maxMs: 1_000 };
    expect([backoffDelay(0, opts, () => 0), backoffDelay(0, opts, () => 0.999)]).toEqual([50, expect.closeTo(100, 0)]);
    expect(backoffDelay(2, opts, () => 0)).toBe(200);
    expect(backoffDelay(10, opts, () => 0)).toBe(500);
    expect(backoffDelay(1_000, opts, () => 1)).toBe(1_000);
  });
});

describe('retryAfterMs: the wait a Retry-After asks for (RFC 9110 §10.2.3)', () => {
  const now = Date.UTC(1994, 10, 6, 8, 49, 30); // Sun, 06 Nov 1994 08:49:30 GMT

  it('reads delay-seconds', () => {
    expect(retryAfterMs('0', now)).toBe(0);
    expect(retryAfterMs('5', now)).toBe(5_000);
    expect(retryAfterMs(' 120 ', now)).toBe(120_000);
  });

  it('reads the three HTTP-date forms, 7 s after now', () => {
    expect(retryAfterMs('Sun, 06 Nov 1994 08:49:37 GMT', now)).toBe(7_000);
    expect(retryAfterMs('Sunday, 06-Nov-94 08:49:37 GMT', now)).toBe(7_000);
    expect(retryAfterMs('Sun Nov  6 08:49:37 1994', now)).toBe(7_000);
  });

  it('a date already past asks for no wait', () => {
    expect(retryAfterMs('Sat, 05 Nov 1994 08:49:37 GMT', now)).toBe(0);
  });

  it.each(['', 'soon', '-1', '1.5', '+3', '0x10', '1e3', 'Sun, 06 Nov 1994 08:49:37 UTC', 'Sun, 31 Feb 1994 08:49:37 GMT', 'Sun, 06 Nov 1994 24:00:00 GMT', '06 Nov 1994 08:49:37 GMT'])(
    'malformed %j: null (the client\'s own backoff)',
    (header) => expect(retryAfterMs(header, now)).toBeNull(),
  );

  it('absent: null; given twice: the longest that parses', () => {
    expect(retryAfterMs(undefined, now)).toBeNull();
    expect(retryAfterMs(['2', 'soon', '7'], now)).toBe(7_000);
    expect(retryAfterMs(['soon'], now)).toBeNull();
  });
});

describe('docs/channel-api.md states the client\'s resend rules', () => {
  const guide = readFileSync(join(REPO_ROOT, 'docs', 'channel-api.md'), 'utf8');
  const rows = tableRows(sectionOf(guide, 'The client: `guidgate/client`'));

  it.each(Object.entries(RESEND_RULES))('%s', (code, rule) => {
    const row = rows.find(([reply = '']) => reply.includes(code));
    expect(row, `no row for ${code}`).toBeDefined();
    const [, , client, applied, end] = row!;
    if (rule.action === 'resend') {
      expect(client).toContain('resends the same bytes');
      expect(applied).toBe(rule.maybeSent ? 'maybe' : 'no (so far)');
      // "Not sent" is not "failed": the row stays open, and the channel resends the same GUID, never a new one.
      if (!rule.maybeSent) {
        expect(client).toContain('never before its `Retry-After`');
        expect(end).toContain('still open, resend the same GUID later');
      }
    } else {
      expect(client).toContain('never resent');
    }
  });
});
