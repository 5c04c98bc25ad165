import { describe, expect, it } from 'vitest';
import type { StoredEvent } from '../../src/events/codecs.js';
import type { StoredRequestRecord } from '../../src/events/store.js';
import { timeline } from '../../src/commands/history.js';
import { indentJson } from '../../src/json/indentJson.js';
import { timelineView } from '../../src/relay/operator/timeline.js';

const actor = { by: 'serve', host: 'h', pid: 1 };
const event = (seq: number, at: number): StoredEvent =>
  ({ guid: 'G', seq, position: seq + 1, type: 'Sent', at, data: { attempt: 1, timeoutMs: 1 }, actor }) as StoredEvent;
const request = (position: number, at: number, code = '0000'): StoredRequestRecord => ({ position, guid: 'G', at, key: null, code, fingerprintMatch: true });

describe('timeline: events and request records by time', () => {
  it('interleaves by time; at the same millisecond the request first (what it caused is stamped after its arrival)', () => {
    const t = timeline([event(0, 10), event(1, 10), event(2, 30)], [request(1, 10), request(2, 20), request(3, 40)]);
    expect(t.map((e) => (e.kind === 'event' ? `e${e.seq}` : `r${e.at}`))).toEqual(['r10', 'e0', 'e1', 'r20', 'e2', 'r40']);
    expect(t[1]).toEqual({ kind: 'event', seq: 0, type: 'Sent', at: 10, data: { attempt: 1, timeoutMs: 1 }, actor });
    expect(t[0]).toEqual({ kind: 'request', at: 10, key: null, code: '0000', fingerprintMatch: true, replayed: false });
  });

  it('a request that arrived when the row was DONE and got its code is a replay; the original, an E904 and one after a purge are not', () => {
    const at = (seq: number, type: string, data: unknown, t: number) => ({ guid: 'G', seq, position: seq + 1, type, at: t, data, actor }) as StoredEvent;
    const events = [
      at(0, 'Claimed', { request: '{}', fingerprint: 'f', channel: null }, 10),
      at(1, 'Sent', { attempt: 1, timeoutMs: 1 }, 11),
      at(2, 'Answered', { code: '0000', response: '{"code":"0000"}', latencyMs: 1 }, 20),
      at(3, 'Purged', { code: '0000', responseSha256: 'ab'.repeat(32) }, 50),
    ];
    const mismatch = { ...request(4, 31, 'E904'), fingerprintMatch: false };
    const t = timeline(events, [request(1, 10), request(2, 15, 'E903'), request(3, 30), mismatch, request(5, 60, 'E905')]);
    const shown = t.flatMap((e) => (e.kind === 'request' ? [`${e.code}${e.replayed ? ' replayed' : ''}`] : []));
    expect(shown).toEqual(['0000', 'E903', '0000 replayed', 'E904', 'E905']);
  });

  it('records stored out of time order (answered in another order than they arrived) are put in time order, ties by position', () => {
    const t = timeline([], [request(1, 30, 'A'), request(2, 10, 'B'), request(3, 10, 'C')]);
    expect(t.map((e) => (e.kind === 'request' ? e.code : ''))).toEqual(['B', 'C', 'A']);
  });

  it('events alone, requests alone, nothing', () => {
    expect(timeline([event(0, 1)], [])).toHaveLength(1);
    expect(timeline([], [request(1, 1)])).toHaveLength(1);
    expect(timeline([], [])).toEqual([]);
  });
});

describe('indentJson: the stored bytes, indented', () => {
  it('indents objects and arrays; empty ones stay on their line; strings (quotes, escapes, structural characters) untouched', () => {
    expect(indentJson('{"a":[1,{"b":"x,y:{z}\\"q\\""}],"e":{},"f":[ ]}')).toBe(
      ['{', '  "a": [', '    1,', '    {', '      "b": "x,y:{z}\\"q\\""', '    }', '  ],', '  "e": {},', '  "f": []', '}'].join('\n'),
    );
  });
  it('keeps numbers as written and both of two equal keys (JSON.parse would round the one and drop the other)', () => {
    expect(indentJson('{"n":12345678901234567890,"k":1,"k":2}')).toBe('{\n  "n": 12345678901234567890,\n  "k": 1,\n  "k": 2\n}');
  });
  it('is null for what is not JSON, and leaves scalars as they are', () => {
    expect(indentJson('{"a":')).toBeNull();
    expect(indentJson('not json')).toBeNull();
    expect(indentJson(' 42 ')).toBe('42');
  });
});

describe('timelineView: what the operator API shows of an event', () => {
  it('a StaleAnswer: its answer parsed, account numbers masked, its SHA-256 and attempts as stored', () => {
    const data = { attempt: 1, currentAttempt: 2, code: '0000', response: '{"code":"0000","from":"6222021001"}', responseSha256: 'ab'.repeat(32), latencyMs: 9 };
    const shown = timelineView({ kind: 'event', seq: 6, type: 'StaleAnswer', at: 1, data, actor: null });
    expect(shown).toEqual({ kind: 'event', seq: 6, type: 'StaleAnswer', at: 1, actor: null, data: { ...data, response: { code: '0000', from: '******1001' } } });
  });
});
