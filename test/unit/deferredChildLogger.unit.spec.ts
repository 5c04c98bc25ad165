import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { deferredChildLogger } from '../../src/relay/deferredChildLogger.js';

function pinoAt(level: string): { logger: pino.Logger; lines: () => Record<string, unknown>[] } {
  let out = '';
  const sink = new Writable({ write(chunk: Buffer, _enc, done) { out += chunk.toString(); done(); } });
  const logger = pino({ level }, sink);
  return { logger, lines: () => out.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>) };
}

describe("a request's logger, made when it first writes (src/relay/deferredChildLogger.ts)", () => {
  it('a request that writes nothing its level keeps makes no child and computes no bindings', () => {
    const { logger, lines } = pinoAt('warn');
    const child = vi.spyOn(logger, 'child');
    const bindings = vi.fn(() => ({ reqId: 'req-1', trace_id: 't', span_id: 's' }));
    const log = deferredChildLogger(logger, bindings, {});
    log.info({ guid: 'g' }, 'transfer');
    log.debug('detail');
    log.trace('more');
    expect(child).not.toHaveBeenCalled();
    expect(bindings).not.toHaveBeenCalled();
    expect(lines()).toEqual([]);
  });

  it('a line its level keeps carries the bindings, and the child is made once', () => {
    const { logger, lines } = pinoAt('warn');
    const child = vi.spyOn(logger, 'child');
    const log = deferredChildLogger(logger, () => ({ reqId: 'req-2', trace_id: 'abc', span_id: 'def' }), {});
    log.warn({ guid: 'g', code: 'E901' }, 'transfer');
    log.error(new Error('boom'), 'ledger unavailable');
    log.info('dropped');
    expect(child).toHaveBeenCalledTimes(1);
    const written = lines();
    expect(written.map((l) => [l.msg, l.reqId, l.trace_id, l.span_id])).toEqual([
      ['transfer', 'req-2', 'abc', 'def'],
      ['ledger unavailable', 'req-2', 'abc', 'def'],
    ]);
    expect(written[0]).toMatchObject({ guid: 'g', code: 'E901' });
    expect(log.level).toBe('warn');
  });

  it("a child of the request's logger keeps the request's bindings; options with a level make the child at once", () => {
    const { logger, lines } = pinoAt('info');
    deferredChildLogger(logger, () => ({ reqId: 'req-3' }), {}).child({ part: 'send' }).info('sent');
    const child = vi.spyOn(logger, 'child');
    const eager = deferredChildLogger(logger, () => ({ reqId: 'req-4' }), { level: 'error' });
    expect(child).toHaveBeenCalledTimes(1);
    eager.warn('dropped by the level the options set');
    eager.error('kept');
    expect(lines().map((l) => [l.msg, l.reqId, l.part])).toEqual([['sent', 'req-3', 'send'], ['kept', 'req-4', undefined]]);
  });
});
