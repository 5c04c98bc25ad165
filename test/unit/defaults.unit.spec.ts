/**
 * The defaults table (src/shared/defaults.ts) is what docs/operating.md's flag tables say and what the command line
 * does: each row's default (a duration as the docs write it, `5s`) is the table's value, and the flag's default in
 * the command's own definition. A row whose default is not a value (`(none)`, `off`, `all`, …) has no default in
 * either.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, type Option } from 'commander';
import { describe, expect, it } from 'vitest';
import { registerReprocess } from '../../src/cli/reprocess.js';
import { registerResolve } from '../../src/cli/resolve.js';
import { registerServe } from '../../src/cli/serve.js';
import { DEFAULTS } from '../../src/shared/defaults.js';
import { parseDuration } from '../../src/shared/duration.js';
import { REPO_ROOT } from '../support/children.js';
import { sectionOf, tableRows } from '../support/markdown.js';

/** The entry of the defaults table each documented flag shows; null: the flag has no default. */
const TABLE_ENTRY: Readonly<Record<string, keyof typeof DEFAULTS | null>> = {
  '--port': 'port',
  '--host': 'host',
  '--db': 'db',
  '--account-url': null,
  '--timeout': 'timeoutMs',
  '--grace': 'graceMs',
  '--max-attempts': 'maxAttempts',
  '--synchronous': 'synchronous',
  '--busy-timeout': 'busyTimeoutMs',
  '--body-timeout': 'bodyTimeoutMs',
  '--max-connections': 'maxConnections',
  '--max-connections-per-address': 'maxConnectionsPerAddress',
  '--max-waiters': 'maxWaiters',
  '--check': null,
  '--require-sync-standby': null,
  '--log-level': 'logLevel',
  '--settle-every': 'settleEveryMs',
  '--min-age': 'minAgeMs',
  '--inquiry-rate': 'inquiryRate',
  '--breaker-failures': 'breakerFailures',
  '--breaker-cooldown': 'breakerCooldownMs',
  '--continuity-window': 'continuityWindowMs',
  '--continuity-dir': null,
  '--journal-witness': 'journalWitness',
  '--writer': 'writer',
  '--keys': null,
  '--insecure-open': null,
  '--tls-cert': null,
  '--tls-key': null,
  '--tls-client-ca': null,
  '--account-ca': null,
  '--notify-url': null,
  '--notify-secret-file': null,
  '--notify-ca': null,
  '--notify-timeout': 'notifyTimeoutMs',
  '--notify-for': 'notifyForMs',
  '--limit': null,
  '--dry-run': null,
  '--concurrency': 'concurrency',
};

/** What a flag table writes where there is no default value. */
const NO_VALUE = /^(|\(none.*\)|\(required\)|\(system CAs\)|off|all)$/;

/** The flag tables of docs/operating.md: one per command, under its heading. */
const TABLES = [
  { command: 'serve', heading: '`serve`' },
  { command: 'resolve', heading: '`resolve`: settle UNKNOWN rows by inquiry' },
  { command: 'reprocess', heading: '`reprocess`: send FAILED rows again' },
] as const;

const program = new Command();
registerServe(program);
registerResolve(program);
registerReprocess(program);

function optionOf(command: string, flag: string): Option | undefined {
  return program.commands.find((c) => c.name() === command)?.options.find((o) => o.long === flag);
}

/** A documented default as a value: durations in milliseconds for the table's `…Ms` entries, numbers as numbers. */
function documentedValue(cell: string, entry: keyof typeof DEFAULTS): unknown {
  if (entry.endsWith('Ms')) return parseDuration(cell);
  return typeof DEFAULTS[entry] === 'number' ? Number(cell) : cell;
}

/** The lines of the section's table whose header is `| flag | default | |` (a section has other tables too). */
function flagTable(lines: ReturnType<typeof sectionOf>): ReturnType<typeof sectionOf> {
  const start = lines.findIndex((l) => /^\|\s*flag\s*\|\s*default\s*\|/.test(l.text));
  if (start < 0) throw new Error('no | flag | default | table in the section');
  const end = lines.findIndex((l, i) => i > start && !l.text.startsWith('|'));
  return lines.slice(start, end < 0 ? undefined : end);
}

describe("docs/operating.md's flag tables show the defaults table", () => {
  const operating = readFileSync(join(REPO_ROOT, 'docs', 'operating.md'), 'utf8');

  for (const { command, heading } of TABLES) {
    const rows = tableRows(flagTable(sectionOf(operating, heading))).map(([flags = '', cell = '']) => ({
      flags: [...flags.matchAll(/--[a-z][a-z-]*/g)].map((m) => m[0]),
      cell: cell.replace(/`/g, '').trim(),
    }));

    it(`${command}: every row names a flag the command has`, () => {
      expect(rows.length).toBeGreaterThan(0);
      for (const { flags } of rows) {
        expect(flags.length, `a row of the ${command} table without a flag`).toBeGreaterThan(0);
        for (const flag of flags) expect(optionOf(command, flag), `${command} ${flag}`).toBeDefined();
      }
    });

    it.each(rows.flatMap(({ flags, cell }) => flags.map((flag) => [flag, cell] as const)))(`${command} %s: documented default '%s'`, (flag, cell) => {
      const entry = TABLE_ENTRY[flag];
      expect(entry, `${flag} is not in this test's TABLE_ENTRY: add it (its entry of src/shared/defaults.ts, or null)`).not.toBeUndefined();
      const option = optionOf(command, flag)!;
      if (entry === null) {
        expect(cell, `${command} ${flag}: the docs give a value, the defaults table none`).toMatch(NO_VALUE);
        expect(option.defaultValue, `${command} ${flag} has a default on the command line`).toBeUndefined();
        return;
      }
      expect(documentedValue(cell, entry!), `${command} ${flag}: docs/operating.md says '${cell}', src/shared/defaults.ts ${entry} is ${String(DEFAULTS[entry!])}`).toBe(DEFAULTS[entry!]);
      expect(option.defaultValue, `${command} ${flag}: the command line's default`).toBe(DEFAULTS[entry!]);
    });
  }
});
