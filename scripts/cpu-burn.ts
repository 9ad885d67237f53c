/**
 * Keeps CPU cores busy, to run the test suite the way a loaded machine would (docs/testing.md).
 *
 *   npx tsx scripts/cpu-burn.ts [--cores N] [--seconds S] [-- COMMAND ARGS...]
 *
 * With a command: burns while the command runs, then stops and exits with the command's status.
 * Without one: burns for --seconds (default 600), then stops. Either way it stops by itself; it also
 * stops at once on SIGINT or SIGTERM. --cores defaults to every core of the machine.
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';

const dash = process.argv.indexOf('--', 2);
const own = dash === -1 ? process.argv.slice(2) : process.argv.slice(2, dash);
const command = dash === -1 ? [] : process.argv.slice(dash + 1);
const { values } = parseArgs({ args: own, options: { cores: { type: 'string' }, seconds: { type: 'string' } } });
const cores = Number(values.cores ?? os.availableParallelism());
const seconds = Number(values.seconds ?? (command.length ? 24 * 3600 : 600));
if (!Number.isInteger(cores) || cores < 1 || !(seconds > 0)) {
  console.error('usage: npx tsx scripts/cpu-burn.ts [--cores N] [--seconds S] [-- COMMAND ARGS...]');
  process.exit(2);
}

// Each worker spins until the shared deadline; checking the clock only every few million
// iterations keeps it a pure CPU load.
const deadline = Date.now() + seconds * 1000;
const spin = `const { workerData } = require('node:worker_threads');
let x = 0;
while (Date.now() < workerData.deadline) for (let i = 0; i < 5e6; i++) x = (x * 1103515245 + 12345) | 0;`;
const workers = Array.from({ length: cores }, () => new Worker(spin, { eval: true, workerData: { deadline } }));
console.error(
  `cpu-burn: ${cores} core(s) busy for at most ${seconds} s${command.length ? ` while running: ${command.join(' ')}` : ''}`,
);

function stop(code: number): void {
  for (const w of workers) void w.terminate();
  process.exitCode = code;
}

if (command.length) {
  const child = spawn(command[0]!, command.slice(1), { stdio: 'inherit' });
  child.on('error', (err) => {
    console.error(`cpu-burn: cannot run ${command[0]}: ${err.message}`);
    stop(127);
  });
  child.on('exit', (code, signal) => stop(code ?? (signal ? 128 + os.constants.signals[signal] : 1)));
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => child.kill(sig));
} else {
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => stop(128 + os.constants.signals[sig]));
}
