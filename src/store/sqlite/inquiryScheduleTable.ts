import type Database from 'better-sqlite3';
import { nextInquiryAt, type InquiryScheduled } from '../../events/inquirySchedule.js';

/**
 * The SQL of `inquiry_schedule`, beside the log: one row per GUID, about its attempt sent at `sent_at` (a new
 * Sent starts the count again). Not an event: an inquiry that could not tell changes no state.
 */
export function inquiryScheduleTable(db: Database.Database) {
  const select = db.prepare('SELECT sent_at, inquiries FROM inquiry_schedule WHERE guid = ?');
  const upsert = db.prepare(
    'INSERT INTO inquiry_schedule (guid, sent_at, inquiries, next_at) VALUES (@guid, @sentAt, @inquiries, @nextAt) ' +
      'ON CONFLICT(guid) DO UPDATE SET sent_at = excluded.sent_at, inquiries = excluded.inquiries, next_at = excluded.next_at',
  );
  return {
    record(guid: string, sentAt: number, at: number, minAgeMs: number): InquiryScheduled {
      const row = select.get(guid) as { sent_at: number; inquiries: number } | undefined;
      const inquiries = row !== undefined && row.sent_at === sentAt ? Number(row.inquiries) + 1 : 1;
      const scheduled = { inquiries, nextInquiryAt: nextInquiryAt(inquiries, at, minAgeMs) };
      upsert.run({ guid, sentAt, inquiries, nextAt: scheduled.nextInquiryAt });
      return scheduled;
    },
  };
}
