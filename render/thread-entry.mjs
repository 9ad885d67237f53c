// The entry of the render engine's worker threads (started by startThread, render/threads.ts):
// worker threads start without the parent's TypeScript loader when the parent runs under a test
// runner, so register tsx here, then load the thread's own code, the last argv entry.
import { argv } from 'node:process';
import { register } from 'tsx/esm/api';

register();
await import(argv[argv.length - 1]);
