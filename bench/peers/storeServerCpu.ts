/**
 * CPU time of the store server that a relay under load makes work, read from `/proc`: Redis's one process (found by
 * the `process_id` it reports), or the PostgreSQL backends serving the benchmark's database together with the
 * server's WAL writer, checkpointer and background writer (which work for every database of that server: anything
 * else using it at the same time is counted too).
 */
import { createClient } from '@redis/client';
import pg from 'pg';
import { cpuOf } from '../processCpu.js';

/** CPU µs so far, by process id, of the processes that serve the relay right now. */
export interface ServerCpu {
  readonly read: () => Promise<Map<number, number>>;
  readonly close: () => Promise<void>;
}

/**
 * The CPU µs the server used between two readings: every process of the second, less what it had used at the first
 * (a process that started in between counts whole; one that ended in between is lost).
 */
export function cpuBetween(before: Map<number, number>, after: Map<number, number>): number {
  let us = 0;
  for (const [pid, now] of after) us += now - (before.get(pid) ?? 0);
  return us;
}

function readAll(pids: Iterable<number>): Map<number, number> {
  const cpu = new Map<number, number>();
  for (const pid of pids) {
    const us = cpuOf(pid);
    if (us !== null) cpu.set(pid, us);
  }
  return cpu;
}

export interface RedisServer extends ServerCpu {
  readonly version: string;
  /** What Redis keeps on disk, in its own words (`appendonly`, `appendfsync`, `save`). */
  readonly persistence: string;
  readonly dbSize: () => Promise<number>;
  readonly flushDb: () => Promise<void>;
}

function infoField(info: string, name: string): string {
  const m = new RegExp(`^${name}:(.*)$`, 'm').exec(info);
  if (m === null) throw new Error(`Redis INFO has no ${name}`);
  return m[1]!.trim();
}

/** The Redis server of `url` (its database, for dbSize and flushDb). */
export async function redisServer(url: string): Promise<RedisServer> {
  const client = await createClient({ url }).connect();
  const info = await client.info('server');
  const pid = Number(infoField(info, 'process_id'));
  if (cpuOf(pid) === null) throw new Error(`Redis at ${url} runs as process ${pid}, which is not on this machine: its CPU cannot be read`);
  const config = await client.configGet(['appendonly', 'appendfsync', 'save']);
  return {
    version: infoField(info, 'redis_version'),
    persistence: `appendonly ${config.appendonly}${config.appendonly === 'yes' ? `, appendfsync ${config.appendfsync}` : ''}, save "${config.save ?? ''}"`,
    read: async () => readAll([pid]),
    dbSize: () => client.dbSize(),
    flushDb: async () => {
      await client.flushDb();
    },
    close: async () => {
      client.destroy();
    },
  };
}

export interface PostgresServer extends ServerCpu {
  readonly version: string;
  /** `fsync` and `synchronous_commit` as the server runs, and `autovacuum`. */
  readonly settings: string;
}

/** The PostgreSQL server at `serverUrl`, serving the database `database` (looked up at each reading). */
export async function postgresServer(serverUrl: string, database: string): Promise<PostgresServer> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  const setting = async (name: string) => ((await client.query<{ setting: string }>('SELECT current_setting($1) AS setting', [name])).rows[0]!.setting);
  const version = await setting('server_version');
  // And autovacuum: with it off, the benchmark's database is never analyzed nor vacuumed, unlike on a server as
  // shipped (docs/performance.md, the sixth pass).
  const settings = `fsync ${await setting('fsync')}, synchronous_commit ${await setting('synchronous_commit')}; autovacuum ${await setting('autovacuum')}`;
  return {
    version,
    settings,
    read: async () => {
      const { rows } = await client.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = $1 OR backend_type IN ('walwriter', 'checkpointer', 'background writer')`,
        [database],
      );
      const cpu = readAll(rows.map((r) => r.pid));
      if (rows.length > 0 && cpu.size === 0) throw new Error(`the PostgreSQL server at ${serverUrl} is not on this machine: its CPU cannot be read`);
      return cpu;
    },
    close: () => client.end(),
  };
}
