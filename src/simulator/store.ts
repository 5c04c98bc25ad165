import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';

export interface SimulatorStats {
  /** Every `POST /transfer` that reached the handler, including ones whose body could not be read. */
  totalCalls: number;
  /** Every application (debit + credit), across all GUIDs. */
  totalApplied: number;
  /** `POST /transfer` calls per GUID (only calls whose body yielded a string `guid`). */
  calls: Record<string, number>;
  /** Applications per GUID. */
  applied: Record<string, number>;
  /** GUIDs applied more than once, sorted. */
  doubleApplied: string[];
  /** Sum of the amounts of all applications. */
  moneyMoved: number;
}

export interface GuidStats {
  guid: string;
  calls: number;
  applied: number;
}

export interface TransferInput {
  guid: string;
  from: string;
  to: string;
  amount: number;
  /** null when the body gave none. */
  currency: string | null;
}

/** One posting of the journal (CONTRACT.md §8): every application of a transfer with code 0000. */
export interface JournalEntry {
  guid: string;
  /** The simulator's own id of the posting (the `txId` of its answer). */
  ref: string;
  from: string;
  to: string;
  amount: number;
  currency: string | null;
  /** ms since the epoch. */
  appliedAt: number;
}

/** Where a page of the journal ended: the next page starts after it. */
export interface JournalCursor {
  at: number;
  id: number;
}

export type Outcome =
  | { kind: 'done'; txId: string; fromBalance: number }
  | { kind: 'insufficient'; fromBalance: number }
  | { kind: 'unknown-account'; account: string };

/**
 * The rule for unknown accounts: an account id that starts with a capital `X` does not exist (→ B202).
 * Every other id exists and is opened on first use with the initial balance.
 */
export function accountExists(id: string): boolean {
  return !id.startsWith('X');
}

/**
 * The simulator's state. With a `dbPath` it lives in a SQLite file (WAL) and survives restarts; without one
 * it lives in an in-memory SQLite database (same code path, gone on close).
 */
export class SimStore {
  private readonly db: Database.Database;
  private readonly initialBalance: number;
  private readonly stmts;

  constructor(dbPath: string | undefined, initialBalance: number) {
    this.initialBalance = initialBalance;
    if (dbPath !== undefined && dbPath !== ':memory:') {
      mkdirSync(dirname(dbPath), { recursive: true });
      this.db = new Database(dbPath);
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = NORMAL');
      this.db.pragma('busy_timeout = 5000');
    } else {
      this.db = new Database(':memory:');
    }
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS accounts (
        id      TEXT PRIMARY KEY,
        balance INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS applications (
        id      INTEGER PRIMARY KEY AUTOINCREMENT,
        guid    TEXT    NOT NULL,
        tx_id   TEXT    NOT NULL,
        from_id TEXT    NOT NULL,
        to_id   TEXT    NOT NULL,
        amount  INTEGER NOT NULL,
        at      INTEGER NOT NULL
      );
      CREATE INDEX IF NOT EXISTS applications_guid ON applications (guid);
      CREATE INDEX IF NOT EXISTS applications_at ON applications (at, id);
      CREATE TABLE IF NOT EXISTS answers (
        guid TEXT PRIMARY KEY,
        body TEXT    NOT NULL,
        at   INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS calls (
        guid TEXT PRIMARY KEY,
        n    INTEGER NOT NULL
      ) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS counters (
        name  TEXT PRIMARY KEY,
        value INTEGER NOT NULL
      ) WITHOUT ROWID;
    `);
    // Files made before the journal existed have no currency column; their old postings keep null.
    const columns = this.db.prepare(`SELECT name FROM pragma_table_info('applications')`).pluck().all();
    if (!columns.includes('currency')) this.db.exec('ALTER TABLE applications ADD COLUMN currency TEXT');
    this.stmts = {
      bumpTotal: this.db.prepare(
        `INSERT INTO counters (name, value) VALUES ('totalCalls', 1)
         ON CONFLICT (name) DO UPDATE SET value = value + 1`,
      ),
      bumpGuid: this.db.prepare(
        `INSERT INTO calls (guid, n) VALUES (?, 1) ON CONFLICT (guid) DO UPDATE SET n = n + 1`,
      ),
      openAccount: this.db.prepare(`INSERT OR IGNORE INTO accounts (id, balance) VALUES (?, ?)`),
      balance: this.db.prepare(`SELECT balance FROM accounts WHERE id = ?`).pluck(),
      addBalance: this.db.prepare(`UPDATE accounts SET balance = balance + ? WHERE id = ?`),
      insertApplication: this.db.prepare(
        `INSERT INTO applications (guid, tx_id, from_id, to_id, amount, currency, at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ),
      journalPage: this.db.prepare(
        `SELECT id, guid, tx_id, from_id, to_id, amount, currency, at FROM applications
         WHERE at < @to AND (at, id) > (@afterAt, @afterId) ORDER BY at, id LIMIT @limit`,
      ),
      insertAnswer: this.db.prepare(`INSERT OR IGNORE INTO answers (guid, body, at) VALUES (?, ?, ?)`),
      answer: this.db.prepare(`SELECT body, at FROM answers WHERE guid = ?`),
      totalCalls: this.db.prepare(`SELECT value FROM counters WHERE name = 'totalCalls'`).pluck(),
      allCalls: this.db.prepare(`SELECT guid, n FROM calls`),
      guidCalls: this.db.prepare(`SELECT n FROM calls WHERE guid = ?`).pluck(),
      allApplied: this.db.prepare(
        `SELECT guid, COUNT(*) AS n, SUM(amount) AS total FROM applications GROUP BY guid`,
      ),
      guidApplied: this.db.prepare(`SELECT COUNT(*) FROM applications WHERE guid = ?`).pluck(),
    };
  }

  /** Counts one `POST /transfer`; `guid` is null when the body did not yield one. */
  countCall(guid: string | null): void {
    this.db.transaction(() => {
      this.stmts.bumpTotal.run();
      if (guid !== null) this.stmts.bumpGuid.run(guid);
    })();
  }

  /**
   * Processes a transfer in one transaction: checks the accounts and funds, moves the money (every time it is
   * called, whatever the GUID's history), and stores `render(outcome)` as the GUID's answer unless an earlier
   * one is already stored. Returns the outcome and the body to send.
   */
  process(input: TransferInput, now: number, render: (o: Outcome) => string): { outcome: Outcome; body: string } {
    return this.db.transaction(() => {
      const outcome = this.move(input, now);
      const body = render(outcome);
      this.stmts.insertAnswer.run(input.guid, body, now);
      return { outcome, body };
    })();
  }

  private move(input: TransferInput, now: number): Outcome {
    for (const id of [input.from, input.to]) {
      if (!accountExists(id)) return { kind: 'unknown-account', account: id };
    }
    this.stmts.openAccount.run(input.from, this.initialBalance);
    this.stmts.openAccount.run(input.to, this.initialBalance);
    const fromBalance = this.stmts.balance.get(input.from) as number;
    if (input.amount > fromBalance) return { kind: 'insufficient', fromBalance };
    this.stmts.addBalance.run(-input.amount, input.from);
    this.stmts.addBalance.run(input.amount, input.to);
    const txId = `tx-${randomUUID()}`;
    this.stmts.insertApplication.run(input.guid, txId, input.from, input.to, input.amount, input.currency, now);
    return { kind: 'done', txId, fromBalance: fromBalance - input.amount };
  }

  /**
   * A page of the journal: postings applied in [from, to) after `after` (null: from the start), in the order they
   * were applied, and where the page ended. Pages, not one cursor held open: a POST may run between two pages.
   */
  journalPage(from: number, to: number, after: JournalCursor | null, limit: number): { entries: JournalEntry[]; next: JournalCursor | null } {
    const rows = this.stmts.journalPage.all({ to, afterAt: after?.at ?? from, afterId: after === null ? -1 : after.id, limit }) as Array<{
      id: number; guid: string; tx_id: string; from_id: string; to_id: string; amount: number; currency: string | null; at: number;
    }>;
    const entries = rows.map((r) => ({ guid: r.guid, ref: r.tx_id, from: r.from_id, to: r.to_id, amount: r.amount, currency: r.currency, appliedAt: r.at }));
    const last = rows[rows.length - 1];
    return { entries, next: rows.length < limit || last === undefined ? null : { at: last.at, id: last.id } };
  }

  /** The first stored answer for a GUID and when it was processed. */
  answer(guid: string): { body: string; at: number } | undefined {
    return this.stmts.answer.get(guid) as { body: string; at: number } | undefined;
  }

  /** The balance of an existing account (the initial balance if it was never used); null if it does not exist. */
  balance(id: string): number | null {
    if (!accountExists(id)) return null;
    const b = this.stmts.balance.get(id) as number | undefined;
    return b ?? this.initialBalance;
  }

  stats(): SimulatorStats {
    const calls: Record<string, number> = {};
    for (const row of this.stmts.allCalls.all() as { guid: string; n: number }[]) calls[row.guid] = row.n;
    const applied: Record<string, number> = {};
    const doubleApplied: string[] = [];
    let totalApplied = 0;
    let moneyMoved = 0;
    for (const row of this.stmts.allApplied.all() as { guid: string; n: number; total: number }[]) {
      applied[row.guid] = row.n;
      totalApplied += row.n;
      moneyMoved += row.total;
      if (row.n > 1) doubleApplied.push(row.guid);
    }
    doubleApplied.sort();
    const totalCalls = (this.stmts.totalCalls.get() as number | undefined) ?? 0;
    return { totalCalls, totalApplied, calls, applied, doubleApplied, moneyMoved };
  }

  guidStats(guid: string): GuidStats {
    const calls = (this.stmts.guidCalls.get(guid) as number | undefined) ?? 0;
    const applied = this.stmts.guidApplied.get(guid) as number;
    return { guid, calls, applied };
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
