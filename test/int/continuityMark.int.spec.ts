/**
 * The SQLite continuity mark (src/store/sqlite/continuityMark.ts, CONTRACT.md v4 §9 "a restored directory is
 * caught"), on real files: kept in its own folder, keyed by the ledger's real path, judged by the event at its
 * position, never trusted when absent for a ledger with history; and `guidgate restore`. The restores themselves, with
 * real serve processes: test/e2e/continuityRestore.e2e.spec.ts.
 */
import { copyFileSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import type { Command } from '../../src/events/decide.js';
import { orThrow } from '../../src/events/storeResult.js';
import { startContinuityGuard } from '../../src/send/continuityGuard.js';
import { continuityDir, continuityDirProblem } from '../../src/store/sqlite/continuityMark.js';
import { openLedger } from '../support/ledgerStore.js';
import { runRestore } from '../../src/cli/restore.js';
import { useCleanup } from '../support/cleanup.js';
import { useTempDir } from '../support/tmp.js';

const submit = (guid: string): Command => ({ type: 'Submit', request: `{"guid":"${guid}"}`, fingerprint: guid, timeoutMs: 1000, maxAttempts: 3 });

describe('the SQLite continuity mark', () => {
  const tmp = useTempDir();
  const cleanup = useCleanup();

  function place() {
    const root = tmp();
    mkdirSync(join(root, 'data'));
    return { db: join(root, 'data', 'l.db'), marks: join(root, 'state'), root };
  }
  const open = (db: string, marks: string) => cleanup.use(openLedger(db, { continuityDir: marks }));
  async function markHere(store: ReturnType<typeof open>): Promise<void> {
    const { position } = await orThrow(store.ledgerStanding());
    await orThrow(store.writeMark({ position, at: Date.now() }));
  }

  it('a new ledger needs none; a ledger with history and no mark in the folder (another --continuity-dir, another home) is unknown standing', async () => {
    const p = place();
    const store = open(p.db, p.marks);
    expect(await orThrow(store.readMark())).toBeNull();
    await orThrow(store.execute('a', submit('a')));
    await markHere(store);
    expect((await orThrow(store.readMark()))?.judged).toBeUndefined();
    // The folder and the file as private as the ledger.
    const [file] = readdirSync(p.marks);
    expect(statSync(p.marks).mode & 0o777).toBe(0o700);
    expect(statSync(join(p.marks, file!)).mode & 0o777).toBe(0o600);
    await orThrow(store.close());
    const elsewhere = open(p.db, join(p.root, 'another'));
    expect((await orThrow(elsewhere.readMark()))?.judged).toMatchObject({ verdict: 'unknown', why: expect.stringMatching(/no continuity mark for this ledger in .*another.*standing is unknown/) });
  });

  it('an older copy put back and written to until its count reaches the mark: the event at the marked position is another (behind)', async () => {
    const p = place();
    const store = open(p.db, p.marks);
    for (const g of ['a', 'b', 'c']) await orThrow(store.execute(g, submit(g)));
    await orThrow(store.close());
    copyFileSync(p.db, join(p.root, 'copy.db'));
    const live = open(p.db, p.marks);
    for (const g of ['d', 'e']) await orThrow(live.execute(g, submit(g)));
    await markHere(live);
    const marked = (await orThrow(live.ledgerStanding())).position;
    await orThrow(live.close());

    for (const f of [p.db, `${p.db}-wal`, `${p.db}-shm`]) rmSync(f, { force: true });
    copyFileSync(join(p.root, 'copy.db'), p.db);
    const restored = open(p.db, p.marks);
    expect((await orThrow(restored.readMark()))?.judged).toMatchObject({ verdict: 'behind', why: expect.stringMatching(/behind its continuity mark/) });
    // New writes bring the count back up to the mark (what a purge run first does): a counter could not tell.
    for (const g of ['x', 'y']) await orThrow(restored.execute(g, submit(g)));
    expect((await orThrow(restored.ledgerStanding())).position).toBeGreaterThanOrEqual(marked);
    expect((await orThrow(restored.readMark()))?.judged).toMatchObject({ verdict: 'behind', why: expect.stringMatching(/history is not the one its continuity mark recorded: at position \d+ the mark names \w+ of e seq \d+ at .*, the log has \w+ of [xy]/) });
  });

  it('a mark is not moved back over a ledger that still reaches it (serve and a command writing side by side); it is over one that went back', async () => {
    const p = place();
    const store = open(p.db, p.marks);
    await orThrow(store.execute('a', submit('a')));
    const low = (await orThrow(store.ledgerStanding())).position;
    await orThrow(store.execute('b', submit('b')));
    await markHere(store);
    const high = (await orThrow(store.ledgerStanding())).position;
    await orThrow(store.writeMark({ position: low, at: Date.now() }));
    expect((await orThrow(store.readMark()))?.position).toBe(high);
    // Once the log no longer has the marked event, the lower standing is written.
    store.db.prepare("DELETE FROM events WHERE guid = 'b'").run();
    store.db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'").run(low);
    await orThrow(store.writeMark({ position: low, at: Date.now() }));
    const moved = await orThrow(store.readMark());
    expect([moved?.position, moved?.judged]).toEqual([low, undefined]);
  });

  it('keyed by the real path: a symbolic link to the ledger shares its mark; a copy at another path has none', async () => {
    const p = place();
    const store = open(p.db, p.marks);
    await orThrow(store.execute('a', submit('a')));
    await markHere(store);
    await orThrow(store.close());
    symlinkSync(p.db, join(p.root, 'link.db'));
    const linked = open(join(p.root, 'link.db'), p.marks);
    expect((await orThrow(linked.readMark()))?.judged).toBeUndefined();
    await orThrow(linked.close());
    copyFileSync(p.db, join(p.root, 'moved.db'));
    const moved = open(join(p.root, 'moved.db'), p.marks);
    expect((await orThrow(moved.readMark()))?.judged?.verdict).toBe('unknown');
  });

  it('the folder: --continuity-dir, else $XDG_STATE_HOME/guidgate (absolute only), else ~/.local/state/guidgate; inside the ledger\'s directory is said to defeat it', () => {
    expect(continuityDir('/srv/marks', {})).toBe('/srv/marks');
    expect(continuityDir(undefined, { XDG_STATE_HOME: '/var/state' })).toBe('/var/state/guidgate');
    expect(continuityDir(undefined, { XDG_STATE_HOME: 'relative' })).toMatch(/\.local\/state\/guidgate$/);
    const p = place();
    expect(continuityDirProblem(p.db, join(p.root, 'data', '.local', 'state', 'guidgate'))).toMatch(/inside the ledger's directory/);
    expect(continuityDirProblem(p.db, join(p.root, 'data'))).toMatch(/inside the ledger's directory/);
    expect(continuityDirProblem(p.db, p.marks)).toBeNull();
  });

  it('serve started with another --continuity-dir (or as another user) on a ledger with history: unknown standing, the window opens, never trusted silently', async () => {
    const p = place();
    const store = open(p.db, p.marks);
    await orThrow(store.execute('a', submit('a')));
    await markHere(store);
    await orThrow(store.close());
    const s = open(p.db, join(p.root, 'changed'));
    const lines: string[] = [];
    const log = { warn: (_l: unknown, m: string) => void lines.push(m), error: (_l: unknown, m: string) => void lines.push(m) };
    const g = await orThrow(startContinuityGuard(s, log, { continuityBreak: () => {} }, { windowMs: 3_600_000, checkEveryMs: 60_000 }));
    await g.stop();
    expect(g.view()).toMatchObject({ state: 'window', breaks: 1 });
    expect(lines.join('\n')).toMatch(/the ledger went back \(there is no continuity mark for this ledger in .*changed/);
  });

  it('a clean stop records the standing as it is then, even while an earlier check is still writing its mark (slow fsyncs under load)', async () => {
    const p = place();
    const inner = open(p.db, p.marks);
    let slow: Promise<void> | null = null;
    let release = (): void => {};
    const store = {
      ...inner,
      // The first mark write after the start hangs until released, as two fsyncs on a loaded disk do.
      writeMark: async (mark: Parameters<typeof inner.writeMark>[0]) => {
        if (slow !== null) await slow;
        return inner.writeMark(mark);
      },
    };
    const log = { warn: () => {}, error: () => {} };
    const g = await orThrow(startContinuityGuard(store, log, { continuityBreak: () => {} }, { windowMs: 3_600_000, checkEveryMs: 60_000 }));
    slow = new Promise<void>((r) => (release = r));
    await orThrow(g.store.execute('a', submit('a')));
    const early = g.check();
    await orThrow(g.store.execute('b', submit('b')));
    const stopped = g.stop();
    slow = null;
    release();
    await early;
    await stopped;
    const last = (await orThrow(inner.ledgerStanding())).position;
    expect((await orThrow(inner.readMark()))?.position).toBe(last);
  });

  it('guidgate restore records the going back (the next guard opens the window, once); --trust opens none', async () => {
    vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const p = place();
    const store = open(p.db, p.marks);
    await orThrow(store.execute('a', submit('a')));
    await orThrow(store.close());
    expect(await runRestore({ db: p.db, continuityDir: p.marks })).toBe(0);
    // --trust over a restore already recorded is refused: it would drop the window the next serve must open.
    vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    expect(await runRestore({ db: p.db, continuityDir: p.marks, trust: true })).toBe(1);
    const guard = async () => {
      const s = open(p.db, p.marks);
      const lines: string[] = [];
      const log = { warn: (_l: unknown, m: string) => void lines.push(m), error: (_l: unknown, m: string) => void lines.push(m) };
      const g = await orThrow(startContinuityGuard(s, log, { continuityBreak: () => {} }, { windowMs: 3_600_000, checkEveryMs: 60_000 }));
      await g.stop();
      await orThrow(s.close());
      return { view: g.view(), lines };
    };
    const first = await guard();
    expect(first.view).toMatchObject({ state: 'window', breaks: 1 });
    expect(first.lines.join('\n')).toMatch(/guidgate restore recorded/);
    // The next start continues that window; it is not a second going back.
    expect((await guard()).view).toMatchObject({ state: 'window', breaks: 0 });

    const q = place();
    const other = open(q.db, q.marks);
    await orThrow(other.execute('a', submit('a')));
    await orThrow(other.close());
    expect(await runRestore({ db: q.db, continuityDir: q.marks, trust: true })).toBe(0);
    const s = open(q.db, q.marks);
    const trusted = await orThrow(s.readMark());
    expect([trusted?.judged, trusted?.restored]).toEqual([undefined, undefined]);
    vi.restoreAllMocks();
  });
});
