import { spawn, type ChildProcess } from 'node:child_process';

/**
 * `node ARGS` in a process of its own (its stderr passed through); `listening` resolves with the URL it prints once
 * it listens (`… listening on URL`, as serve, naive, the simulator and the peers' relays say it), and rejects with
 * what it printed if it exits first.
 */
export function startListening(args: readonly string[]): { child: ChildProcess; listening: Promise<string> } {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const listening = new Promise<string>((ok, fail) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) ok(m[1]!);
    });
    child.once('exit', (code) => fail(new Error(`${args.join(' ')} exited ${code}: ${out}`)));
  });
  return { child, listening };
}
