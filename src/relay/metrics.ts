import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { STATUSES } from '../events/codecs.js';
import type { LedgerReadModel } from '../events/store.js';

/** Prometheus metrics of one relay. prom-client: the standard exposition format without hand-written text. */
export function createMetrics(store: LedgerReadModel, clock: () => number) {
  const registry = new Registry();
  const replies = new Counter({ name: 'guidgate_replies_total', help: 'Replies to channels, by code', labelNames: ['code'], registers: [registry] });
  const calls = new Counter({
    name: 'guidgate_account_calls_total',
    help: 'POST /transfer calls to the account system, by outcome (definite, unknown, failed)',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'guidgate_account_call_duration_seconds',
    help: 'Latency of POST /transfer calls to the account system',
    labelNames: ['outcome'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  // Read from the ledger at scrape time, so they are true across processes (resolve, reprocess).
  new Gauge({
    name: 'guidgate_ledger_rows',
    help: 'Ledger rows by status',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      const summary = await store.countByStatus();
      for (const s of STATUSES) this.set({ status: s }, summary[s].count);
    },
  });
  new Gauge({
    name: 'guidgate_oldest_row_age_seconds',
    help: 'Age of the oldest UNKNOWN and FAILED rows (since their last event); 0 when there is none',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      const summary = await store.countByStatus();
      for (const s of ['UNKNOWN', 'FAILED'] as const) {
        const oldest = summary[s].oldestUpdatedAt;
        this.set({ status: s }, oldest === null ? 0 : Math.max(0, (clock() - oldest) / 1000));
      }
    },
  });
  return {
    registry,
    reply(code: string): void {
      replies.inc({ code });
    },
    call(outcome: 'definite' | 'unknown' | 'failed', latencyMs: number): void {
      calls.inc({ outcome });
      latency.observe({ outcome }, latencyMs / 1000);
    },
  };
}
export type Metrics = ReturnType<typeof createMetrics>;
