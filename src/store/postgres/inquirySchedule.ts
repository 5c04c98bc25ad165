import type pg from 'pg';
import { LedgerCorruptError } from '../../events/errors.js';
import { nextInquiryTimes, type InquiryScheduled } from '../../events/inquirySchedule.js';

/**
 * Records an inquiry about the attempt sent at `sentAt` that could not tell, and when to ask again
 * (`nextInquiryAt`: the wait grows with each one), in one statement: the count and the time it picks move
 * together. A new Sent starts the count again. Two processes recording at once each count one: an inquiry may
 * repeat, and the schedule only spaces them out.
 */
export async function recordUnclearInquiry(db: pg.Pool | pg.ClientBase, guid: string, sentAt: number, at: number, minAgeMs: number): Promise<InquiryScheduled> {
  const { rows } = await db.query<{ inquiries: number; next_at: number }>({
    name: 'guidgate_record_unclear_inquiry',
    text: `INSERT INTO inquiry_schedule AS s (guid, sent_at, inquiries, next_at) VALUES ($1, $2, 1, ($3::bigint[])[1])
           ON CONFLICT (guid) DO UPDATE SET
             inquiries = CASE WHEN s.sent_at = excluded.sent_at THEN s.inquiries + 1 ELSE 1 END,
             sent_at = excluded.sent_at,
             next_at = ($3::bigint[])[least(CASE WHEN s.sent_at = excluded.sent_at THEN s.inquiries + 1 ELSE 1 END, cardinality($3::bigint[]))]
           RETURNING inquiries, next_at`,
    values: [guid, sentAt, nextInquiryTimes(at, minAgeMs)],
  });
  const row = rows[0];
  if (row === undefined) throw new LedgerCorruptError('inquiry schedule: the upsert returned no row');
  return { inquiries: Number(row.inquiries), nextInquiryAt: Number(row.next_at) };
}
