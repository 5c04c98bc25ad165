import { type Command, InvalidArgumentError } from 'commander';
import * as E from 'fp-ts/lib/Either.js';
import type { KeysCommandError } from '../relay/auth/keysAdmin.js';
import { parseScopes, type Scope } from '../relay/auth/keysFile.js';
import { flag } from './options.js';
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
    .description('the keys: names and scopes (never hashes)')
    .addOption(keysFlag())
    .action(async (o: { keys: string }, cmd: Command) => {
      const result = (await lib()).listKeys(o.keys);
      if (E.isRight(result)) for (const k of result.right) process.stdout.write(`${k.name}\t${k.scopes.join(',')}\n`);
      finish(cmd, result);
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
