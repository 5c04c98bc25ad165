import { type Command, InvalidArgumentError } from 'commander';
import * as E from 'fp-ts/lib/Either.js';
import type { KeysCommandError } from '../relay/auth/keysAdmin.js';
import { parseScopes, type Scope } from '../relay/auth/keysFile.js';
import { flag } from './options.js';
import { setExit } from './output.js';
import { withLedger } from './withLedger.js';
import { orThrow } from '../events/storeResult.js';
import { DEFAULTS } from '../shared/defaults.js';


function scopesArg(value: string): Scope[] {
  const parsed = parseScopes(value.trim());
  // The operator's own argument, not the keys file: saying which word is wrong helps and shows nothing new.
  if (E.isLeft(parsed)) throw new InvalidArgumentError(`${parsed.left.word === '' ? 'an empty scope' : `unknown scope '${parsed.left.word}'`} (transfer, read, admin; several separated by commas)`);
  return parsed.right;
}

const keysFlag = () => flag('--keys <path>', 'the keys file').default(DEFAULTS.keysFile);

/** Reports a failed keys command on stderr; commander turns exit 2 into bad usage like its own errors. */
function finish(cmd: Command, result: E.Either<KeysCommandError, unknown>): void {
  if (E.isRight(result)) return;
  if (result.left.exit === 2) cmd.error(`guidgate: ${result.left.message}`, { exitCode: 2, code: 'guidgate.usage' });
  process.stderr.write(`guidgate: ${result.left.message}\n`);
  process.exitCode = 1;
}

/** `guidgate keys add|list|remove` (CONTRACT.md §5, §6). */
export function registerKeysCommand(program: Command): void {
  const keys = program.command('keys').description('make, list and remove the keys `serve --keys` accepts');
  // Loaded when used, like the other commands.
  const lib = () => import('../relay/auth/keysAdmin.js');

  keys
    .command('add')
    .description('make a key: appends its line to the keys file (created 0600) and prints its token once')
    .argument('<name>', 'the key name, ^[A-Za-z0-9._-]{1,64}$ (recorded as the channel of what it claims)')
    .addOption(flag('--scopes <scopes>', 'transfer, read, admin (several separated by commas)').argParser(scopesArg).makeOptionMandatory())
    .addOption(keysFlag())
    .action(async (name: string, o: { scopes: Scope[]; keys: string }, cmd: Command) => {
      const { addKey, newFileOwnerNote } = await lib();
      const result = addKey(o.keys, name, o.scopes);
      // The token alone on its line, so that `TOKEN=$(guidgate keys add …)` takes exactly it; a note on stderr.
      if (E.isRight(result)) {
        process.stdout.write(`${result.right.token}\n`);
        const note = newFileOwnerNote(o.keys, result.right.created);
        if (note !== null) process.stderr.write(`guidgate keys: ${note}\n`);
      }
      finish(cmd, result);
    });

  keys
    .command('list')
    .description('the keys, one a line: name, scopes, when `keys add` made it, and with --db when serve last saw it used (never hashes)')
    .addOption(keysFlag())
    .addOption(flag('--db <path>', "serve's ledger (a file or a postgres:// URL): also each key's last use, which serve writes at most once a minute"))
    .action(async (o: { keys: string; db?: string }, cmd: Command) => {
      const result = (await lib()).listKeys(o.keys);
      if (E.isLeft(result)) return finish(cmd, result);
      // '-': not known (made before guidgate recorded it; no --db); 'never': the ledger has no use of it.
      let lastUsed: ReadonlyMap<string, number> | null = null;
      if (o.db !== undefined) {
        const db = o.db;
        const exit = await withLedger('keys list', db, async (store) => {
          lastUsed = new Map((await orThrow(store.keyUses())).map((u) => [u.key, u.at]));
          return 0;
        });
        if (exit !== 0) return setExit(exit);
      }
      const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(ms).toISOString());
      for (const k of result.right) {
        const used = lastUsed === null ? '-' : (iso((lastUsed as ReadonlyMap<string, number>).get(k.name)) ?? 'never');
        process.stdout.write(`${k.name}\t${k.scopes.join(',')}\t${iso(k.created) ?? '-'}\t${used}\n`);
      }
    });

  keys
    .command('remove')
    .description('remove a key (a running serve stops accepting it on SIGHUP)')
    .argument('<name>', 'the key name')
    .addOption(keysFlag())
    .action(async (name: string, o: { keys: string }, cmd: Command) => {
      finish(cmd, (await lib()).removeKey(o.keys, name));
    });
}
