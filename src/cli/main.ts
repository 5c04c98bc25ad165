/**
 * `guidgate`: wires one file per command (flags, parsing, output, exit status) into one program.
 * Exit codes (CONTRACT.md §5): 0 done, 1 failed, 2 bad usage.
 */
import { Command, CommanderError } from 'commander';
import { registerCheckCommand } from './check.js';
import { registerDemo } from './demo.js';
import { applyBooleanEnv, checkDbUrl, checkTracingEnv, configFlag, readConfigBeforeEachCommand } from './options.js';
import { endQuietlyOnClosedPipe, escapeControls } from './output.js';
import { registerHistory } from './history.js';
import { registerNotifications } from './notifications.js';
import { registerKeysCommand } from './keys.js';
import { registerLedger } from './ledger.js';
import { registerNaive } from './naive.js';
import { registerPurge } from './purge.js';
import { registerRebuild } from './rebuild.js';
import { registerReconcile } from './reconcile.js';
import { registerReprocess } from './reprocess.js';
import { registerResolve } from './resolve.js';
import { registerRestore } from './restore.js';
import { registerServe } from './serve.js';
import { registerSimulator } from './simulator.js';
import { registerStats } from './stats.js';
import { packageVersion } from '../shared/packageRoot.js';

const program = new Command('guidgate')
  .description('A durable GUID ledger in front of a non-idempotent account system')
  .version(packageVersion(), '-V, --version', 'print the version')
  .exitOverride()
  // --config belongs to every command: each command's --help lists it with the program's own options.
  .addOption(configFlag())
  .configureHelp({ showGlobalOptions: true })
  // commander's own messages quote what was given (a flag's value, a variable's): escaped like every line.
  .configureOutput({ outputError: (str, write) => write(str.split('\n').map(escapeControls).join('\n')) })
  .hook('preAction', (_program, command) => {
    applyBooleanEnv(command);
    checkDbUrl(command);
    checkTracingEnv(command);
  });

registerServe(program);
registerSimulator(program);
registerNaive(program);
// ---- operator commands (CONTRACT.md §5); their code is loaded only when one of them runs ----
registerDemo(program);
registerResolve(program);
registerReprocess(program);
registerPurge(program);
registerHistory(program);
registerNotifications(program);
registerLedger(program);
registerStats(program);
registerRebuild(program);
registerReconcile(program);
registerRestore(program);
registerKeysCommand(program);
registerCheckCommand(program);
readConfigBeforeEachCommand(program);

endQuietlyOnClosedPipe();
try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Help asked for (`--help`, `help`) and the version are not failures. Help shown because no command was given
    // (`guidgate`, `guidgate keys`: commander marks it with a non-zero exitCode, and writes it to stderr) is bad
    // usage, like every other parse problem.
    const asked = err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || (err.code === 'commander.help' && err.exitCode === 0);
    process.exit(asked ? 0 : 2);
  }
  process.stderr.write(`guidgate: ${escapeControls(err instanceof Error ? err.message : String(err))}\n`);
  process.exit(1);
}
