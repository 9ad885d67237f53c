// The entry of our worker threads (the lip-sync thread, the audio viseme thread): worker threads
// start without the parent's TypeScript loader when the parent runs under a test runner, so
// register tsx here, then load the thread's own code, named by the last argv entry (Worker `argv`).
import { argv } from 'node:process';
import { register } from 'tsx/esm/api';

register();
await import(argv[argv.length - 1]);
