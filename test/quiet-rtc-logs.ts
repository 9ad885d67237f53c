/**
 * Setup file for the realtime tests, which quiets rtc-node in the test process:
 *
 * - rtc-node logs at debug level (one JSON line per ignored data stream, per connect callback) unless
 *   NODE_ENV is `production` when it is first loaded, and its logger is not exported. Those lines
 *   flooded CI's log and pushed the failures out of its tail, so the test process loads it once as
 *   production would, then puts NODE_ENV back for everything else.
 * - Its WebRTC engine's log capture goes off, as in the worker (agent/rtc-logs.ts), with the engine's
 *   own log at errors only. RUST_LOG is read once, as the engine starts, then put back: the worker
 *   processes a test starts keep their default (warnings).
 */
const previous = { NODE_ENV: process.env.NODE_ENV, RUST_LOG: process.env.RUST_LOG };
process.env.NODE_ENV = 'production';
process.env.RUST_LOG ??= 'error';
try {
  const { quietRtcLogs } = await import('../agent/rtc-logs.ts');
  quietRtcLogs();
} finally {
  for (const [name, value] of Object.entries(previous)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
}
