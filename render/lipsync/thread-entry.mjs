// The lip-sync thread's entry: worker threads start without the parent's TypeScript loader when
// the parent runs under a test runner, so register tsx here, then load the thread's code.
import { register } from 'tsx/esm/api';

register();
await import('./thread-worker.ts');
